# Summarizes ncu --csv files (one per probe run) into one line per kernel launch: duration,
# SM and DRAM throughput, registers, grid, achieved occupancy, thread instructions.
# Usage: python3 summarize.py DIR
import csv,glob,sys
short={'gpu__time_duration.sum':'us','sm__throughput.avg.pct_of_peak_sustained_elapsed':'SM%','dram__throughput.avg.pct_of_peak_sustained_elapsed':'DRAM%','launch__registers_per_thread':'regs','launch__grid_size':'grid','sm__warps_active.avg.pct_of_peak_sustained_active':'occ%','sm__sass_thread_inst_executed.sum':'inst'}
for f in sorted(glob.glob(sys.argv[1]+'/ncu-*.csv')):
    rows=list(csv.reader(open(f)))
    hdr=None; data={}
    for r in rows:
        if r and r[0]=='ID': hdr=r; continue
        if hdr and len(r)==len(hdr):
            d=dict(zip(hdr,r))
            key=(int(d['ID']),d['Kernel Name'][:20])
            v=d['Metric Value'].replace(',','')
            m=short.get(d['Metric Name'],d['Metric Name'])
            if m=='us': v='%.1f'%(float(v)/1000)
            data.setdefault(key,{})[m]=v
    print(f.split('/')[-1])
    for k,v in sorted(data.items()):
        print("   %s %s"%(k[1], ' '.join('%s=%s'%(m,v[m]) for m in ['us','SM%','DRAM%','regs','grid','occ%','inst'] if m in v)))
