/* Print how every GPU pair is joined, from the live machine or a recorded one:
 *   topo_pairs [FILE]
 * Build: cc topo_pairs.c $(pkg-config --cflags --libs p2pkit) */
#include <p2pkit.h>
#include <stdio.h>

int main(int argc, char **argv) {
  p2pkit_topo_t topo;
  p2pkit_status_t st = argc > 1 ? p2pkit_topo_load(argv[1], &topo) : p2pkit_topo_discover(&topo);
  if (st != P2PKIT_SUCCESS) {
    fprintf(stderr, "topo_pairs: %s: %s\n", p2pkit_strerror(st), p2pkit_last_error());
    return st == P2PKIT_ERR_NO_DRIVER || st == P2PKIT_ERR_NO_DEVICE ? 2 : 1;
  }
  int n = p2pkit_topo_gpu_count(topo);
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      p2pkit_pair_t p;
      if (a != b && p2pkit_topo_pair(topo, a, b, &p) == P2PKIT_SUCCESS)
        printf("GPU%d -> GPU%d: %s p2p=%d expected %.0f GB/s\n", a, b, p.label, p.p2p,
               p.expected_gbps);
    }
  p2pkit_topo_destroy(topo);
  return 0;
}
