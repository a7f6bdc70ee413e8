# A numpy loop of the shape of a training step's host side: each iteration makes four arrays of SIZE
# bytes from two ufuncs in turn (multiply, add), so that with SIZE >= 64 KiB every block gets a
# stack under oomtrace's default options. A workload of `make bench` (scripts/bench.sh installs
# numpy, Debian's python3-numpy, or skips it saying why); it measured the sampled-stacks walk cache
# (README, "Each thread remembers...").
#   python3 tests/bench/np_loop.py ITERATIONS SIZE     prints the loop's own time and a checksum
import sys
import time

import numpy as np

n, size = int(sys.argv[1]), int(sys.argv[2])


def layer(x):
    return x * 1.0001 + 0.5


def step(x):
    return float(layer(layer(x))[0])


x = np.ones(size // 8)
t0 = time.perf_counter()
acc = 0.0
for i in range(n):
    acc += step(x)
t1 = time.perf_counter()
print("@loop_s %.4f" % (t1 - t0))
print("@checksum %.3f" % acc)
