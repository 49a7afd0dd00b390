#!/usr/bin/env python3
"""Two builds of examples/cpu_vs_numpy.rs against each other on the CPU, alternating in one run.

Starts both binaries (each answers one workload call per stdin line, see cpu_vs_numpy.rs),
alternates them per round (the order swapped every round) and prints, per workload, the
median time of each and the median of the per-round ratios B / A.

  python3 benches/cpu_ab.py A_BINARY B_BINARY [--rounds R] WORKLOAD SIZE [WORKLOAD SIZE]...
  python3 benches/cpu_ab.py old/cpu_vs_numpy target/release/examples/cpu_vs_numpy psf 512
"""
import statistics, subprocess, sys

def main():
    args = sys.argv[1:]
    rounds = 21
    if "--rounds" in args:
        k = args.index("--rounds")
        rounds = int(args[k + 1])
        del args[k:k + 2]
    if len(args) < 4 or len(args) % 2:
        sys.exit(__doc__)
    bins, rest = args[:2], args[2:]
    procs = [subprocess.Popen([b], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for b in bins]

    def call(p, w):
        p.stdin.write(w + "\n")
        p.stdin.flush()
        return float(p.stdout.readline().split()[1])

    print(f"# A = {bins[0]}\n# B = {bins[1]}\nworkload\tA\tB\tB/A (median of per-round ratios)")
    for j in range(0, len(rest), 2):
        w = f"{rest[j]} {rest[j + 1]}"
        for p in procs:
            call(p, w)
            call(p, w)
        ta, tb, ratio = [], [], []
        for r in range(rounds):
            if r % 2 == 0:
                a = call(procs[0], w); b = call(procs[1], w)
            else:
                b = call(procs[1], w); a = call(procs[0], w)
            ta.append(a); tb.append(b); ratio.append(b / a)
        print(f"{w}\t{statistics.median(ta) * 1e3:.3f} ms\t{statistics.median(tb) * 1e3:.3f} ms\t"
              f"{statistics.median(ratio):.3f}", flush=True)
    for p in procs:
        p.stdin.close()
        p.wait()

if __name__ == "__main__":
    main()
