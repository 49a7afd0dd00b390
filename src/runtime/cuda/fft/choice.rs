//! The choice between the generated passes and cuFFT for one transform (C2C, R2C or C2R),
//! by measurement (`FftBackend::Auto`, the default): the first use of a (kind, shape, axes,
//! dtype, direction) on a device times both on scratch buffers of that shape, and a
//! device-to-device copy of the array and of one element; keeps cuFFT unless the passes
//! are clearly faster ([`MARGIN`]), and writes the decision next to the disk kernel cache,
//! so that later
//! processes on the same kind of device skip the measurement. `LAZYFUSE_FFT=cufft|generated`
//! forces one.
//!
//! The planner asks before it fuses the elementwise kernel computing a transform's input
//! into its first pass (fusion needs the generated passes); that kernel then neither runs
//! nor writes its array, nor does the transform read it: the passes are credited with the
//! memory time of one copy of the array ([`Choice::fused_generated`]). A transform that
//! runs unfused asks without the credit. While this thread records a CUDA graph nothing is
//! measured (recording runs nothing): an undecided transform then uses cuFFT, and is
//! decided at its next use outside a recording.

use super::plan::Precision;
use crate::config::FftBackend;
use crate::graph::{FftKind, FftSpec};
use crate::runtime::cuda::compile::lock;
use crate::runtime::cuda::device::{event_elapsed, CudaDevice};
use crate::runtime::cuda::driver_err;
use crate::Result;
use lazyfuse_codegen::DType;
use smallvec::SmallVec;
use std::collections::HashMap;
use std::io::Write as _;
use std::sync::Mutex;
use std::time::Duration;

/// Timed runs of each implementation after one untimed run (which compiles the passes and
/// creates the cuFFT plan); the fastest run of each is compared.
const TIMED_RUNS: usize = 5;

/// The generated passes are chosen when this many times their fastest run is still below
/// cuFFT's: small transforms (a few microseconds either way, launch-bound) would otherwise
/// flip with timing noise, so a tie goes to cuFFT. The transforms where the passes win win
/// by 1.4-2.9x (the first axis from 2^13, `benches/NOTES.md`).
const MARGIN: f64 = 1.1;

/// Name of the file of decisions in the disk cache directory.
const FILE: &str = "fft-choices.tsv";

/// One decision: which implementation, and the times it was made from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Choice {
    /// The generated passes won (by [`MARGIN`]).
    pub(crate) generated: bool,
    /// Fastest generated run.
    pub(crate) generated_time: Duration,
    /// Fastest cuFFT run.
    pub(crate) cufft_time: Duration,
    /// The memory time of one device-to-device copy of the array: the fastest copy less the
    /// fastest copy of one element (its launch; zero in decisions stored before it was
    /// measured).
    pub(crate) copy_time: Duration,
}

impl Choice {
    /// Whether the generated passes win with the elementwise kernel computing the input
    /// fused into their first pass: by [`MARGIN`] against cuFFT plus that kernel's memory
    /// traffic, counted as one copy of the array less its launch (it writes the array and
    /// the transform reads it; in a recorded graph, where plans repeat, a launch costs far
    /// less than the timed one: counting it picked the passes for the 256^2 sim step's
    /// inverse, which then ran 6 % slower).
    pub(crate) fn fused_generated(&self) -> bool {
        self.generated
            || self.generated_time.as_secs_f64() * MARGIN
                < (self.cufft_time + self.copy_time).as_secs_f64()
    }
}

/// A transform as the decisions know it (on one device): kind, dtype, shape (the real
/// array's for R2C and C2R), axes, direction.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Transform {
    kind: FftKind,
    dtype: DType,
    shape: SmallVec<[usize; 4]>,
    axes: SmallVec<[usize; 4]>,
    inverse: bool,
}

/// The decisions of one device: those made or used in this process by transform, and
/// those read from the disk cache by text key (see [`key`]; loaded on first use, moved to
/// the first map when first asked for, so that a run with a known transform formats no
/// key).
#[derive(Default)]
pub(crate) struct Choices(Mutex<Option<Known>>);

/// What [`Choices`] guards.
struct Known {
    made: HashMap<Transform, Choice>,
    stored: HashMap<String, Choice>,
}

/// The key of a transform on a device: the device's name and compute capability, the
/// dtype, shape, axes and direction, and `r2c` or `c2r` after a real transform's (a C2C
/// key reads as before real transforms were measured).
fn key(dev: &CudaDevice, t: &Transform) -> String {
    let (major, minor) = dev.compute_capability();
    let kind = match t.kind {
        FftKind::C2C => "",
        FftKind::R2C => " r2c",
        FftKind::C2R => " c2r",
    };
    format!(
        "{} sm_{major}{minor} {} {:?} axes {:?} {}{kind}",
        dev.name(),
        t.dtype,
        t.shape.as_slice(),
        t.axes.as_slice(),
        if t.inverse { "inverse" } else { "forward" }
    )
}

/// The decisions stored in `dir` (lines `key \t generated|cufft \t gen_ns \t cufft_ns \t
/// copy_ns`, the last field absent in older files; malformed lines are skipped, a later
/// line wins).
fn load(dir: Option<&std::path::Path>) -> HashMap<String, Choice> {
    let mut map = HashMap::new();
    let Some(text) = dir.and_then(|d| std::fs::read_to_string(d.join(FILE)).ok()) else {
        return map;
    };
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let (k, which, g, c, copy) = match f.as_slice() {
            [k, which, g, c] => (k, which, g, c, "0"),
            [k, which, g, c, copy] => (k, which, g, c, *copy),
            _ => continue,
        };
        let (Ok(g), Ok(c), Ok(copy)) = (g.parse::<u64>(), c.parse::<u64>(), copy.parse::<u64>())
        else {
            continue;
        };
        let generated = match *which {
            "generated" => true,
            "cufft" => false,
            _ => continue,
        };
        map.insert(
            k.to_string(),
            Choice {
                generated,
                generated_time: Duration::from_nanos(g),
                cufft_time: Duration::from_nanos(c),
                copy_time: Duration::from_nanos(copy),
            },
        );
    }
    map
}

/// Appends one decision to the file in `dir` (one `write` of a whole line, so concurrent
/// processes do not interleave within lines). Failures are only logged.
fn store(dir: Option<&std::path::Path>, key: &str, c: &Choice) {
    let Some(dir) = dir else {
        return;
    };
    let line = format!(
        "{key}\t{}\t{}\t{}\t{}\n",
        if c.generated { "generated" } else { "cufft" },
        c.generated_time.as_nanos(),
        c.cufft_time.as_nanos(),
        c.copy_time.as_nanos()
    );
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(FILE))
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        crate::config::debug_log!(1, "cannot record an FFT choice in {}: {e}", dir.display());
    }
}

impl CudaDevice {
    /// Whether the transform `spec` over `shape` (the real array's for R2C and C2R) of the
    /// complex `dtype` runs as generated passes on this device: never for transforms the
    /// generator does not cover (`plan_r2c` and `plan_c2r` say for real ones);
    /// else as `LAZYFUSE_FFT` / `lf::set_fft_backend` says, and for `Auto` by measurement
    /// (see the module), `fused` when the kernel computing its input runs inside its first
    /// pass if it does ([`Choice::fused_generated`]). Errors are the device's (a failed
    /// allocation or launch).
    pub(crate) fn prefers_generated(
        &self,
        spec: &FftSpec,
        shape: &[usize],
        dtype: DType,
        fused: bool,
    ) -> Result<bool> {
        use lazyfuse_codegen::fft as gen;
        let covered = match spec.kind {
            FftKind::R2C => gen::plan_r2c(shape, &spec.axes, dtype).is_some(),
            FftKind::C2R => gen::plan_c2r(shape, &spec.axes, dtype).is_some(),
            // what `plan_c2c` covers, checked without planning the passes
            FftKind::C2C => {
                gen::complex_size(dtype).is_some()
                    && !shape.contains(&0)
                    && spec
                        .axes
                        .iter()
                        .all(|&a| a < shape.len() && gen::covers(shape[a], dtype))
            }
        };
        if !covered {
            return Ok(false);
        }
        match crate::config::fft_backend() {
            FftBackend::Cufft => Ok(false),
            FftBackend::Generated => Ok(true),
            FftBackend::Auto => Ok(self.fft_choice(spec, shape, dtype)?.is_some_and(|c| {
                if fused {
                    c.fused_generated()
                } else {
                    c.generated
                }
            })),
        }
    }

    /// The decision for a covered transform, measured now when there is none (`None`
    /// while this thread records a CUDA graph, when nothing can be measured, and when the
    /// scratch buffers of the measurement do not fit in device memory).
    pub(crate) fn fft_choice(
        &self,
        spec: &FftSpec,
        shape: &[usize],
        dtype: DType,
    ) -> Result<Option<Choice>> {
        let t = Transform {
            kind: spec.kind,
            dtype,
            shape: shape.into(),
            axes: spec.axes.iter().copied().collect(),
            inverse: spec.inverse,
        };
        let dir = self.cache_dir();
        let k = {
            let mut guard = lock(&self.fft_choices.0);
            let known = guard.get_or_insert_with(|| Known {
                made: HashMap::new(),
                stored: load(dir),
            });
            if let Some(c) = known.made.get(&t) {
                return Ok(Some(*c));
            }
            let k = key(self, &t);
            if let Some(c) = known.stored.get(&k) {
                let c = *c;
                known.made.insert(t, c);
                return Ok(Some(c));
            }
            k
        };
        if self.capture_stream().is_some() {
            return Ok(None);
        }
        // measured without the lock: two threads may both measure a new transform once
        // no memory for the scratch buffers: cuFFT this time, undecided (the next use
        // tries again); other errors are the device's and reach the caller
        let c = match self.measure_fft(spec, shape, dtype) {
            Err(crate::Error::OutOfMemory { .. }) => return Ok(None),
            r => r?,
        };
        crate::config::debug_log!(
            1,
            "fft choice for {k}: {}, fused {} (generated {:.1} us, cuFFT {:.1} us, copy {:.1} us)",
            if c.generated { "generated" } else { "cuFFT" },
            if c.fused_generated() {
                "generated"
            } else {
                "cuFFT"
            },
            c.generated_time.as_secs_f64() * 1e6,
            c.cufft_time.as_secs_f64() * 1e6,
            c.copy_time.as_secs_f64() * 1e6
        );
        let mut guard = lock(&self.fft_choices.0);
        let known = guard.get_or_insert_with(|| Known {
            made: HashMap::new(),
            stored: HashMap::new(),
        });
        if known.made.insert(t, c).is_none() {
            store(dir, &k, &c);
        }
        Ok(Some(c))
    }

    /// The decisions made so far on this device: (key, choice), sorted by key.
    pub(crate) fn fft_choices(&self) -> Vec<(String, Choice)> {
        let guard = lock(&self.fft_choices.0);
        let mut v: HashMap<String, Choice> = HashMap::new();
        if let Some(known) = guard.as_ref() {
            v.extend(known.stored.iter().map(|(k, c)| (k.clone(), *c)));
            v.extend(known.made.iter().map(|(t, c)| (key(self, t), *c)));
        }
        let mut v: Vec<(String, Choice)> = v.into_iter().collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Times the generated passes against cuFFT for the transform, and a copy of its array
    /// (the smaller end's bytes, for a real transform), on zeroed scratch buffers of its
    /// shapes, on this thread's stream (synchronized).
    fn measure_fft(&self, spec: &FftSpec, shape: &[usize], dtype: DType) -> Result<Choice> {
        let prec = match dtype {
            DType::C128 => Precision::Double,
            _ => Precision::Single,
        };
        // the half spectrum's shape, at the complex end of a real transform
        let mut half = shape.to_vec();
        if let Some(l) = half.last_mut() {
            *l = *l / 2 + 1;
        }
        let (in_shape, out_shape, in_dt, out_dt) = match spec.kind {
            FftKind::C2C => (shape, shape, dtype, dtype),
            FftKind::R2C => (shape, &half[..], prec.real_dtype(), dtype),
            FftKind::C2R => (&half[..], shape, dtype, prec.real_dtype()),
        };
        let (n_in, n_out) = (
            in_shape.iter().product::<usize>(),
            out_shape.iter().product::<usize>(),
        );
        let me = self.arc()?;
        let input = self.alloc(me, in_dt, n_in)?;
        let out = self.alloc(me, out_dt, n_out)?;
        let lane = self.order(&[], &[&input, &out])?;
        // SAFETY: `input` holds `n_in` elements of `in_dt`, zeroed on the stream that runs
        // the transforms below.
        unsafe {
            cudarc::driver::result::memset_d8_async(
                input.device_ptr(),
                0,
                n_in * in_dt.size(),
                lane.stream.cu_stream(),
            )
        }
        .map_err(driver_err("cuMemsetD8Async"))?;
        let generated = || self.run_generated_buffer(spec, &input, &out, shape, dtype);
        let cufft = || self.cufft_into(spec, &input, &out, in_shape, out_shape, false, prec);
        if !generated()? {
            // the passes cannot run it (a table or grid limit): cuFFT, unmeasured
            return Ok(Choice {
                generated: false,
                generated_time: Duration::MAX,
                cufft_time: Duration::ZERO,
                copy_time: Duration::ZERO,
            });
        }
        cufft()?;
        let copy = |bytes: usize| {
            // SAFETY: both buffers hold at least `bytes` (the callers copy the smaller
            // one's bytes or one element's), ordered on this stream (above).
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    out.device_ptr(),
                    input.device_ptr(),
                    bytes,
                    lane.stream.cu_stream(),
                )
            }
            .map_err(driver_err("cuMemcpyDtoDAsync"))
        };
        // one element of the smaller dtype: an R2C of one real value has a 4-byte input
        let (all, one) = (
            (n_in * in_dt.size()).min(n_out * out_dt.size()),
            in_dt.size().min(out_dt.size()),
        );
        copy(all)?;
        let mut best = [Duration::MAX; 4];
        for _ in 0..TIMED_RUNS {
            for (i, t) in best.iter_mut().enumerate() {
                let start = self.timing_event()?;
                match i {
                    0 => drop(generated()?),
                    1 => cufft()?,
                    2 => copy(all)?,
                    _ => copy(one)?,
                }
                let end = self.timing_event()?;
                *t = (*t).min(event_elapsed(&start, &end)?);
            }
        }
        lane.stream
            .synchronize()
            .map_err(driver_err("cuStreamSynchronize"))?;
        drop((input, out));
        Ok(Choice {
            generated: best[0].as_secs_f64() * MARGIN < best[1].as_secs_f64(),
            generated_time: best[0],
            cufft_time: best[1],
            copy_time: best[2].saturating_sub(best[3]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_decisions_with_and_without_the_copy_time() {
        let dir = std::env::temp_dir().join(format!("lf-choices-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let us = Duration::from_micros;
        let c = Choice {
            generated: false,
            generated_time: us(12),
            cufft_time: us(10),
            copy_time: us(4),
        };
        // an older line (no copy time), a malformed one, then one this build stores
        std::fs::write(
            dir.join(FILE),
            "old key\tgenerated\t9000\t11000\nbad\tcufft\tx\t1\n",
        )
        .unwrap();
        store(Some(&dir), "new key", &c);
        let map = load(Some(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(map.len(), 2, "{map:?}");
        assert_eq!(map["new key"], c);
        let old = map["old key"];
        assert!(old.generated && old.copy_time == Duration::ZERO);
        assert_eq!((old.generated_time, old.cufft_time), (us(9), us(11)));
    }

    #[test]
    fn fusion_credits_the_passes_with_one_copy() {
        let us = Duration::from_micros;
        let choice = |g, c, copy| Choice {
            generated: us(g).as_secs_f64() * MARGIN < us(c).as_secs_f64(),
            generated_time: us(g),
            cufft_time: us(c),
            copy_time: us(copy),
        };
        // 12 against 10 + 4: fused passes win by more than the margin, alone they lose
        let c = choice(12, 10, 4);
        assert!(!c.generated && c.fused_generated());
        // 12 against 10 + 1: within the margin, cuFFT either way
        let c = choice(12, 10, 1);
        assert!(!c.generated && !c.fused_generated());
        // a win alone is a win fused
        let c = choice(5, 10, 0);
        assert!(c.generated && c.fused_generated());
    }
}
