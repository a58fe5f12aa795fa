/* A module with thread-local storage (preload_refused_free_after_tls_dlopens
 * dlopens twenty copies of it, each built under its own name: each a new
 * TLS module). */
__thread char tls_module_buf[64];
char *tls_module_touch(void) {
  tls_module_buf[0]++;
  return tls_module_buf;
}
