//! The `sim100` step of BENCH.md on a field sharded over a device mesh: every GPU of the
//! host when there are any, else two CPU shards. Prints the synchronized time per step,
//! each device's kernel and FFT time for one step, and the largest difference from the
//! same steps run unsharded on one device.
//!
//! Run: `cargo run --release --example 07_multi_gpu [-- N [STEPS [SHARDS]]]` (N defaults
//! to 4096 on CUDA, 256 on the CPU; STEPS to 20; SHARDS to the number of GPUs, or 2 on the
//! CPU: more shards than devices are dealt out round-robin, so one GPU can hold several).
//!
//! Under a launcher (one process per GPU: `torchrun --nproc-per-node=8 target/release/
//! examples/07_multi_gpu`, or `srun`/`mpirun` with `MASTER_ADDR` set) the mesh is
//! `lf::Mesh::global`: every rank runs this program on its own GPU, holds its block, and
//! rank 0 prints (SHARDS is then the number of ranks). See docs/distributed.md.
//!
//! The field is split by rows. `fft2` transforms the rows in place, moves the data so
//! that every device holds whole columns (all-to-all), and transforms those: the spectrum
//! is split by columns, where the multiplier is split the same way; `ifft2` runs the
//! other way round and leaves the field split by rows again.

use lazyfuse as lf;
use lf::{Array, DType, Device, EntryKind, Mesh, Sharded};
use std::time::Instant;

const DT: f64 = 0.1;

/// `1 / (1 + dt k^2)` with `k = 2 pi fftfreq(n, 1/n) / n` on both axes (BENCH.md).
fn multiplier(n: usize, dev: &Device) -> Array {
    lf::with_default_device(dev, || {
        let k = lf::fft::fftfreq(n, 1.0 / n as f64, DType::F32)
            * (2.0 * std::f64::consts::PI / n as f64);
        let k2 = k.square();
        let k2 = k2.reshape(&[1, -1]) + k2.reshape(&[-1, 1]);
        (k2 * DT + 1.0).reciprocal()
    })
}

/// One step on one device, lazily.
fn step(u: &Array, mult: &Array) -> Array {
    let v = u + (u - u * u * u) * DT;
    lf::fft::ifft2(&(lf::fft::fft2(&v) * mult)).real()
}

/// One step on the sharded field (split by rows; `mult` split by columns), lazily.
fn sharded_step(u: &Sharded, mult: &Sharded) -> lf::Result<Sharded> {
    let v = u.map(|p| p + (p - p * p * p) * DT)?;
    let spectrum = v.fft2()?; // split by columns
    spectrum.zip(mult, |s, m| s * m)?.ifft2()?.map(|p| p.real())
}

fn main() -> lf::Result<()> {
    let nums: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    // a world of one without launcher variables
    let group = lf::distributed::init()?;
    let lead = group.rank() == 0;
    let gpus = Device::cuda_count();
    let mesh = if group.world_size() > 1 {
        Mesh::global(&group)?
    } else {
        let available: Vec<Device> = match gpus {
            0 => vec![Device::cpu()],
            g => (0..g).map(Device::cuda).collect::<lf::Result<_>>()?,
        };
        let shards = nums
            .get(2)
            .copied()
            .unwrap_or(if gpus > 0 { gpus } else { 2 })
            .max(1);
        let devices: Vec<Device> = (0..shards)
            .map(|i| available[i % available.len()].clone())
            .collect();
        Mesh::new(&devices)?
    };
    let n = nums
        .first()
        .copied()
        .unwrap_or(if gpus > 0 { 4096 } else { 256 });
    let steps = nums.get(1).copied().unwrap_or(20).max(1);
    let first = mesh.devices()[0].clone();
    if lead {
        println!(
            "sim100 step, {n}x{n} f32, {steps} steps, {} shards on {:?} ({}, {} process(es), \
             collectives: {:?})",
            mesh.len(),
            mesh.distinct_devices(),
            first.name(),
            group.world_size(),
            mesh.backend()
        );
    }

    let mult = multiplier(n, &first);
    let u0 = lf::with_default_device(&first, || lf::random::normal(&[n, n], DType::F32, 0) * 0.1);
    lf::eval(&[&mult, &u0])?;
    let mult_s = mult.shard(&mesh, 1)?;
    let mut u = u0.shard(&mesh, 0)?;
    lf::shard::eval(&[&mult_s, &u])?;

    // first step (planning and compiling), then a warm-up step
    let t0 = Instant::now();
    for _ in 0..2 {
        u = sharded_step(&u, &mult_s)?;
        u.eval()?;
    }
    mesh.synchronize()?;
    if lead {
        println!(
            "first two steps: {:.1} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
    }

    let t = Instant::now();
    for _ in 2..steps {
        u = sharded_step(&u, &mult_s)?;
        u.eval()?;
    }
    mesh.synchronize()?;
    let timed = steps.saturating_sub(2).max(1);
    if lead {
        println!(
            "sharded: {:.3} ms/step",
            t.elapsed().as_secs_f64() * 1e3 / timed as f64
        );
    }

    // one more step, profiled: where each device's time went
    let (r, report) = lf::profile(|| -> lf::Result<Sharded> {
        let next = sharded_step(&u, &mult_s)?;
        next.eval()?;
        mesh.synchronize()?;
        Ok(next)
    });
    u = r?;
    let whole = u.gather_to_rank(0)?;
    group.barrier()?;
    let Some(whole) = whole else {
        return Ok(()); // ranks other than 0 are done
    };
    println!("per device, one step:");
    for (dev, time, calls) in report.per_device() {
        println!(
            "  {dev:<8} {:>9.3} ms in {calls} kernels and library calls (NCCL included)",
            time.as_secs_f64() * 1e3
        );
    }
    println!(
        "  copies   {:>9.3} ms, {:.1} MiB (peer copies between GPUs; to and from the host \
         through host memory)",
        report.total_time(EntryKind::DeviceCopy).as_secs_f64() * 1e3,
        report.total_bytes(EntryKind::DeviceCopy) as f64 / (1 << 20) as f64
    );

    // the same steps on one device
    let mut v = u0.clone();
    let t = Instant::now();
    for _ in 0..=steps {
        v = step(&v, &mult);
        v.eval()?;
    }
    first.synchronize()?;
    println!(
        "one device: {:.3} ms/step (including the first)",
        t.elapsed().as_secs_f64() * 1e3 / (steps + 1) as f64
    );
    let diff = (whole - &v).abs().max().item::<f32>()?;
    println!("max |sharded - single device| = {diff:.3e}");
    Ok(())
}
