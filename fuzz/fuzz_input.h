/* What both fuzz targets share: FAIL (a message naming the target, then
 * abort, which libFuzzer reports with the input) and the reader of the
 * input bytes (zeros once it is used up).  Define FUZZ_NAME first. */
#ifndef HL_FUZZ_INPUT_H
#define HL_FUZZ_INPUT_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FAIL(...)                                                              \
  do {                                                                         \
    fprintf(stderr, FUZZ_NAME ": ");                                           \
    fprintf(stderr, __VA_ARGS__);                                              \
    fputc('\n', stderr);                                                       \
    abort();                                                                   \
  } while (0)

typedef struct {
  const uint8_t *p;
  size_t n;
} input;

static inline uint8_t u8(input *in) {
  if (!in->n) return 0;
  in->n--;
  return *in->p++;
}
static inline uint16_t u16(input *in) { return (uint16_t)(u8(in) | (uint16_t)u8(in) << 8); }

#endif
