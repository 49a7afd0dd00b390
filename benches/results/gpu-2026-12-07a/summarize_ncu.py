#!/usr/bin/env python3
"""One row per kernel of an `ncu --section SpeedOfLight --section Occupancy --section
WarpStateStats --section LaunchStats` text log: what bounds each generated FFT pass.
Usage: summarize_ncu.py LOG..."""
import re
import sys

FIELDS = [
    ("us", r"Duration\s+us\s+([\d.,]+)"),
    ("DRAM%", r"DRAM Throughput\s+%\s+([\d.,]+)"),
    ("L1%", r"L1/TEX Cache Throughput\s+%\s+([\d.,]+)"),
    ("L2%", r"L2 Cache Throughput\s+%\s+([\d.,]+)"),
    ("SM%", r"Compute \(SM\) Throughput\s+%\s+([\d.,]+)"),
    ("occ%", r"Achieved Occupancy\s+%\s+([\d.,]+)"),
    ("cyc/issue", r"Warp Cycles Per Issued Instruction\s+cycle\s+([\d.,]+)"),
    ("regs", r"Registers Per Thread\s+register/thread\s+([\d.,]+)"),
]

for path in sys.argv[1:]:
    print(f"# {path}")
    print("kernel\tgrid x block\t" + "\t".join(f for f, _ in FIELDS) + "\ttop stall")
    rows, cur, wrapped = [], None, False
    for line in open(path):
        if wrapped:
            # the stall's wrapped line: what the warps wait for
            cur["stall"] += " " + " ".join(line.split()[:4])
            wrapped = False
        m = re.match(r"\s+(lf_fft\w+) \((\d+), 1, 1\)x\((\d+), 1, 1\)", line)
        if m:
            cur = {"k": m.group(1), "launch": f"{m.group(2)} x {m.group(3)}"}
            rows.append(cur)
            continue
        if cur is None:
            continue
        for name, pat in FIELDS:
            mm = re.search(pat, line)
            if mm and name not in cur:
                cur[name] = mm.group(1)
        mm = re.search(r"spends ([\d.]+) cycles being stalled (.*?)\s*$", line)
        if mm and "stall" not in cur:
            cur["stall"] = f"{mm.group(1)} cycles {mm.group(2)}"
            wrapped = True
    for r in rows:
        vals = "\t".join(r.get(f, "-") for f, _ in FIELDS)
        print(f"{r['k']}\t{r['launch']}\t{vals}\t{r.get('stall', '-')}")
