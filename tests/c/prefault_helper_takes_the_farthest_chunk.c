/* thp_prefault's choice of chunk (release/prefault.c, hl__prefault_pick),
 * without threads or huge pages: the helper takes the FARTHEST unclaimed
 * chunk within thp_prefault of the allocation's, never the allocation's own,
 * never one outside its range, never one already claimed.  Taking the
 * nearest instead was the defect of item 27 (docs/performance.md): the
 * helper was always at the chunk the fill reached next, the fill waited for
 * it at every chunk and all the zeroing ran on one CPU -- a timing effect
 * prefault_helper_faults_only_what_the_fill_uses cannot assert.  The last
 * part replays the protocol step by step (the helper faults one chunk per
 * chunk the fill crosses; the fill claims a chunk it reaches unclaimed) and
 * checks that the two zero from the two ends of the window. */
#include <string.h>

#include "check.h"
#include "internal.h"

#define N 32

static uint32_t pick(const uint8_t *st, uint32_t first, uint32_t end, uint32_t cursor,
                     uint32_t ahead) {
  return hl__prefault_pick(st + first, first, end, cursor, ahead);
}

static void choices(void) {
  uint8_t st[N];
  memset(st, HL_PF_FREE, sizeof st);
  /* range [10, 30), the allocation in chunk 10, 4 ahead: 14, then inward */
  uint32_t expect[] = {14, 13, 12, 11};
  for (int i = 0; i < 4; i++) {
    uint32_t c = pick(st, 10, 30, 10, 4);
    CHECK(c == expect[i], "pick %d: chunk %u, expected %u (the farthest free one)", i, c,
          expect[i]);
    st[c] = HL_PF_BUSY;
  }
  CHECK(pick(st, 10, 30, 10, 4) == HL_PF_NONE,
        "every chunk of the window claimed: picked %u (never the allocation's own chunk 10)",
        pick(st, 10, 30, 10, 4));
  /* the allocation moves to 12: the window reaches 16 */
  CHECK(pick(st, 10, 30, 12, 4) == 16, "cursor 12: picked %u, expected 16",
        pick(st, 10, 30, 12, 4));
  /* claimed chunks of any kind are skipped */
  memset(st, HL_PF_FREE, sizeof st);
  st[14] = HL_PF_DONE;
  st[13] = HL_PF_OWN;
  CHECK(pick(st, 10, 30, 10, 4) == 12, "14 done, 13 the allocation's: picked %u, expected 12",
        pick(st, 10, 30, 10, 4));
  /* the range's end bounds the window */
  memset(st, HL_PF_FREE, sizeof st);
  CHECK(pick(st, 10, 30, 27, 8) == 29, "near the end: picked %u, expected 29",
        pick(st, 10, 30, 27, 8));
  CHECK(pick(st, 10, 30, 29, 8) == HL_PF_NONE, "at the last chunk: picked %u",
        pick(st, 10, 30, 29, 8));
  /* nothing below the range, nothing with no window, no range */
  CHECK(pick(st, 10, 30, 3, 4) == HL_PF_NONE, "window [4, 7] below the range: picked %u",
        pick(st, 10, 30, 3, 4));
  CHECK(pick(st, 10, 30, 10, 0) == HL_PF_NONE, "thp_prefault 0 ahead: picked %u",
        pick(st, 10, 30, 10, 0));
  CHECK(pick(st, 10, 10, 10, 4) == HL_PF_NONE, "an empty range: picked %u",
        pick(st, 10, 10, 10, 4));
}

/* The fill crosses chunks first+1 .. end-1; before each step the helper
 * faults one chunk in.  Farthest-first, the fill finds the near chunks of
 * the first window unclaimed and zeroes them itself while the helper works
 * at the window's far end; after that it finds each chunk done. */
static void two_ends(uint32_t ahead) {
  enum { FIRST = 0, END = 24 };
  uint8_t st[END];
  memset(st, HL_PF_FREE, sizeof st);
  uint32_t helper = 0, own = 0, cursor = FIRST;
  uint32_t first_pick = pick(st, FIRST, END, cursor, ahead);
  st[FIRST] = HL_PF_OWN; /* the fill's first chunk is its own */
  own++;
  for (cursor = FIRST + 1; cursor < END; cursor++) {
    uint32_t c = pick(st, FIRST, END, cursor - 1, ahead);
    if (c != HL_PF_NONE) {
      st[c] = HL_PF_DONE;
      helper++;
    }
    if (st[cursor] == HL_PF_FREE) {
      st[cursor] = HL_PF_OWN;
      own++;
    } else {
      CHECK(st[cursor] == HL_PF_DONE, "chunk %u: state %u", cursor, st[cursor]);
    }
  }
  CHECK(first_pick == FIRST + ahead, "ahead %u: the first pick was %u, expected %u", ahead,
        first_pick, FIRST + ahead);
  CHECK(helper + own == END - FIRST, "ahead %u: %u by the helper + %u by the fill, %u chunks",
        ahead, helper, own, END - FIRST);
  /* the fill zeroes the window's near chunks (ahead of them: 1 .. ahead-1)
   * and its first; the helper all the others */
  CHECK(own == ahead, "ahead %u: the fill faulted %u chunks in itself, expected %u", ahead, own,
        ahead);
  CHECK(helper == END - FIRST - ahead, "ahead %u: the helper faulted %u, expected %u", ahead,
        helper, END - FIRST - ahead);
  printf("ahead %u: helper %u chunks, fill %u of %u\n", ahead, helper, own, END - FIRST);
}

int main(void) {
  choices();
  two_ends(4);
  two_ends(8);
  two_ends(1);
  return 0;
}
