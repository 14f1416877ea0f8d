// The ArborX side of skyjoin's GPU DBSCAN bench (skyjoin.bench.arborx).
//
//   dbscan_driver FILE N EPS MINPTS REPS
//
// FILE holds N points as raw float32 (x, y, z).  For each of ArborX's
// implementations (FDBSCAN-DenseBox, then FDBSCAN), REPS runs of each of two
// residences, after one untimed warm-up:
//   device: the points already on the GPU, the labels left there (the dbscan
//           call alone, fenced);
//   host:   the points in host memory, the labels wanted there: the device
//           allocation, the copy in, the dbscan call and the copy of the
//           labels out.
// One line a run:
//   arborx IMPL RESIDENCE eps EPS minpts MINPTS: SECONDS s  noise K  clusters C
// with the noise and cluster counts of that run's labels (counted after the
// clock stops).
#include <ArborX_DBSCAN.hpp>
#include <Kokkos_Core.hpp>
#include <Kokkos_Timer.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

using ExecutionSpace = Kokkos::DefaultExecutionSpace;
using MemorySpace = ExecutionSpace::memory_space;
using Point = ArborX::Point<3>;
using HostLabels = Kokkos::View<int *, Kokkos::HostSpace>;

// noise points (label < 0) and distinct labels.  O(n + largest label).
static void counts(HostLabels const &labels, long &noise, long &clusters) {
  long const n = labels.extent(0);
  int top = -1;
  for (long i = 0; i < n; ++i) top = std::max(top, labels(i));
  std::vector<char> seen(static_cast<size_t>(top) + 1, 0);
  noise = clusters = 0;
  for (long i = 0; i < n; ++i) {
    int const l = labels(i);
    if (l < 0) ++noise;
    else if (!seen[l]) { seen[l] = 1; ++clusters; }
  }
}

int main(int argc, char *argv[]) {
  Kokkos::ScopeGuard guard(argc, argv);
  if (argc != 6) {
    std::fprintf(stderr, "usage: dbscan_driver FILE N EPS MINPTS REPS\n");
    return 2;
  }
  std::string const file = argv[1];
  long const n = std::stol(argv[2]);
  float const eps = std::stof(argv[3]);
  int const minpts = std::stoi(argv[4]);
  int const reps = std::stoi(argv[5]);
  std::vector<Point> host(n);
  std::ifstream in(file, std::ios::binary);
  static_assert(sizeof(Point) == 3 * sizeof(float), "a point is three floats");
  if (!in.read(reinterpret_cast<char *>(host.data()), sizeof(Point) * n)) {
    std::fprintf(stderr, "dbscan_driver: %s holds fewer than %ld points\n", file.c_str(), n);
    return 2;
  }
  Kokkos::View<Point *, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> hv(
      host.data(), n);
  Kokkos::View<Point *, MemorySpace> resident(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "resident"), n);
  Kokkos::deep_copy(resident, hv);
  char const *names[2] = {"FDBSCAN-DenseBox", "FDBSCAN"};
  for (int impl = 0; impl < 2; ++impl) {
    ArborX::DBSCAN::Parameters params;
    params.setImplementation(impl == 0 ? ArborX::DBSCAN::Implementation::FDBSCAN_DenseBox
                                       : ArborX::DBSCAN::Implementation::FDBSCAN);
    ExecutionSpace exec;
    ArborX::dbscan(exec, resident, eps, minpts, params);  // warm-up
    exec.fence();
    for (int residence = 0; residence < 2; ++residence) {
      for (int r = 0; r < reps; ++r) {
        exec.fence();
        Kokkos::Timer clock;
        HostLabels labels;
        if (residence == 0) {
          auto dl = ArborX::dbscan(exec, resident, eps, minpts, params);
          exec.fence();
          double const s = clock.seconds();
          labels = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace{}, dl);
          long noise, clusters;
          counts(labels, noise, clusters);
          std::printf("arborx %s device eps %g minpts %d: %.4f s  noise %ld  clusters %ld\n",
                      names[impl], eps, minpts, s, noise, clusters);
        } else {
          Kokkos::View<Point *, MemorySpace> points(
              Kokkos::view_alloc(Kokkos::WithoutInitializing, "points"), n);
          Kokkos::deep_copy(exec, points, hv);
          auto dl = ArborX::dbscan(exec, points, eps, minpts, params);
          labels = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace{}, dl);
          exec.fence();
          double const s = clock.seconds();
          long noise, clusters;
          counts(labels, noise, clusters);
          std::printf("arborx %s host eps %g minpts %d: %.4f s  noise %ld  clusters %ld\n",
                      names[impl], eps, minpts, s, noise, clusters);
        }
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
