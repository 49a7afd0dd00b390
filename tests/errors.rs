//! Misuse and bad environments: integer scalars that do not fit the array's dtype, panics
//! that name the caller's line (not a line inside lazyfuse), and a `LAZYFUSE_DEVICE` that
//! names no usable device, which fails every creation (checked in child processes, as the
//! default device is resolved once per process).

#[macro_use]
mod common;

use lazyfuse as lf;
use lf::{fft, linalg, Array, DType, Device};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe, PanicHookInfo};
use std::sync::{Mutex, MutexGuard};

/// A panic caught by [`PanicProbe::catch`]: its message and where it was raised.
#[derive(Debug)]
struct Caught {
    msg: String,
    file: String,
    line: u32,
}

thread_local! {
    /// Set while [`PanicProbe::catch`] runs on this thread.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    /// The location of the last panic caught on this thread.
    static LOCATION: RefCell<Option<(String, u32)>> = const { RefCell::new(None) };
}

/// The panic hook is process-wide: one probe at a time.
static HOOK: Mutex<()> = Mutex::new(());

/// A panic hook recording [`PanicHookInfo::location`] of the panics [`PanicProbe::catch`]
/// expects, without printing them; every other panic (a failing assertion, on this or
/// another thread) goes to the default hook. Dropping it restores the default hook.
struct PanicProbe {
    _lock: MutexGuard<'static, ()>,
}

impl PanicProbe {
    fn install() -> PanicProbe {
        let lock = HOOK.lock().unwrap_or_else(|e| e.into_inner());
        let default: Box<dyn Fn(&PanicHookInfo<'_>) + Sync + Send> = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CATCHING.with(|c| c.get()) {
                let loc = info.location().map(|l| (l.file().to_string(), l.line()));
                LOCATION.with(|l| *l.borrow_mut() = loc);
            } else {
                default(info);
            }
        }));
        PanicProbe { _lock: lock }
    }

    /// Runs `f`; the panic it raised, if any.
    fn catch(&self, f: impl FnOnce()) -> Option<Caught> {
        LOCATION.with(|l| *l.borrow_mut() = None);
        CATCHING.with(|c| c.set(true));
        let r = catch_unwind(AssertUnwindSafe(f));
        CATCHING.with(|c| c.set(false));
        let e = r.err()?;
        let msg = e
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| e.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "<non-text panic>".into());
        let (file, line) = LOCATION
            .with(|l| l.borrow_mut().take())
            .unwrap_or_else(|| ("<no location>".into(), 0));
        Some(Caught { msg, file, line })
    }
}

impl Drop for PanicProbe {
    fn drop(&mut self) {
        // taking the hook puts the default one back (before the lock is released)
        drop(std::panic::take_hook());
    }
}

/// A case that must panic at this file's line with a message containing each of `needles`.
type Case<'a> = (&'static str, Vec<&'static str>, Box<dyn FnOnce() + 'a>);

/// Runs the cases under one probe; the failures, as text.
fn check_panics(cases: Vec<Case<'_>>) -> Vec<String> {
    let probe = PanicProbe::install();
    let mut fails = Vec::new();
    for (name, needles, f) in cases {
        match probe.catch(f) {
            None => fails.push(format!("{name}: did not panic")),
            Some(c) => {
                if c.file != file!() {
                    fails.push(format!(
                        "{name}: panic located at {}:{}, not in {} ({})",
                        c.file,
                        c.line,
                        file!(),
                        c.msg
                    ));
                }
                for n in needles {
                    if !c.msg.contains(n) {
                        fails.push(format!("{name}: message {:?} lacks {n:?}", c.msg));
                    }
                }
            }
        }
    }
    fails
}

macro_rules! case {
    ($name:expr, [$($needle:expr),*], $body:expr) => {
        (
            $name,
            vec![$($needle),*],
            Box::new(move || {
                let _ = $body;
            }) as Box<dyn FnOnce() + '_>,
        )
    };
}

fn i32s(v: &[i32]) -> Array {
    Array::from_slice(v, &[v.len()]).unwrap()
}

const BIG: i64 = 1 << 40;

device_test!(integer_scalars_that_do_not_fit_panic);
fn integer_scalars_that_do_not_fit_panic(_: &Device) {
    let a = i32s(&[-3, 0, 7]);
    let c = a.gt(0);
    let big = BIG.to_string();
    let big: &'static str = Box::leak(big.into_boxed_str());
    let (a, c) = (&a, &c);
    let fails = check_panics(vec![
        case!("a + big", ["add", big, "int32", "OverflowError"], a + BIG),
        case!("big + a", ["add", big, "int32"], BIG + a),
        case!("a - big", ["subtract", big, "int32"], a - BIG),
        case!(
            "a * -big",
            ["multiply", "-1099511627776", "int32"],
            a * -BIG
        ),
        case!("a % big", ["remainder", big, "int32"], a % BIG),
        case!("a.maximum(big)", ["maximum", big, "int32"], a.maximum(BIG)),
        case!("a.pow(big)", ["power", big, "int32"], a.pow(BIG)),
        case!("a.floor_div(big)", ["floor_divide", big], a.floor_div(BIG)),
        case!(
            "MAX + 1",
            ["add", "2147483648", "int32"],
            a + (i32::MAX as i64 + 1)
        ),
        case!(
            "MIN - 1",
            ["add", "-2147483649", "int32"],
            a + (i32::MIN as i64 - 1)
        ),
        case!(
            "where(c, a, big)",
            ["where", big, "int32"],
            lf::where_(c, a, BIG)
        ),
        case!(
            "where(c, big, a)",
            ["where", big, "int32"],
            lf::where_(c, BIG, a)
        ),
        case!(
            "clip(big, ..)",
            ["clip", big, "int32"],
            a.clip(BIG, 2 * BIG)
        ),
        case!(
            "clip(.., -big)",
            ["clip", "-1099511627776", "int32"],
            a.clip(0, -BIG)
        ),
        case!(
            "full",
            ["full", big, "int32"],
            Array::full(&[2], BIG, DType::I32)
        ),
    ]);
    assert!(fails.is_empty(), "{fails:#?}");

    // what fits, and what NumPy 2 computes exactly, still works
    let v = |x: Array| x.to_vec::<i32>().unwrap();
    let b = |x: Array| {
        assert_eq!(x.dtype(), DType::Bool);
        x.to_vec::<bool>().unwrap()
    };
    assert_eq!(
        v(a + (i32::MAX as i64 - 7)),
        [i32::MAX - 10, i32::MAX - 7, i32::MAX]
    );
    assert_eq!(
        v(a + (i32::MIN as i64 + 3)),
        [i32::MIN, i32::MIN + 3, i32::MIN + 10]
    );
    assert_eq!(b(a.lt(BIG)), [true; 3]);
    assert_eq!(b(a.gt(-BIG)), [true; 3]);
    assert_eq!(b(a.ge(BIG)), [false; 3]);
    assert_eq!(b(a.eq(BIG)), [false; 3]);
    assert_eq!(b(a.ne(BIG)), [true; 3]);
    assert_eq!(b(a.le(-BIG)), [false; 3]);
    let clipped = a.clip(-BIG, BIG);
    assert_eq!(clipped.dtype(), DType::I32);
    assert_eq!(v(clipped), [-3, 0, 7]);
    assert_eq!(v(a.clip(0, BIG)), [0, 0, 7]);
    assert_eq!(v(a.clip(-BIG, 1)), [-3, 0, 1]);
    // a float scalar promotes the integer array to F64, as before
    let f = a + 1e12;
    assert_eq!(f.dtype(), DType::F64);
    assert_eq!(f.to_vec::<f64>().unwrap(), [1e12 - 3.0, 1e12, 1e12 + 7.0]);
    // I64 and Bool arrays hold the scalar
    let w = a.astype(DType::I64) + BIG;
    assert_eq!(w.to_vec::<i64>().unwrap(), [BIG - 3, BIG, BIG + 7]);
    let t = c + BIG;
    assert_eq!(t.dtype(), DType::I64);
    assert_eq!(t.to_vec::<i64>().unwrap(), [BIG, BIG, BIG + 1]);
}

device_test!(panics_point_at_the_caller);
#[allow(clippy::eq_op)] // an array with itself is one of the cases
fn panics_point_at_the_caller(_: &Device) {
    let x = Array::from_vec((0..6).map(|i| i as f32).collect(), &[2, 3]).unwrap();
    let y = Array::zeros(&[4], DType::F32);
    let z = Array::zeros(&[2, 3], DType::C64);
    let b = Array::zeros(&[3], DType::Bool);
    let i = Array::zeros(&[3], DType::I32);
    let m1 = Array::zeros(&[2, 3, 4], DType::F32);
    let m2 = Array::zeros(&[3, 4, 5], DType::F32);
    let e = Array::zeros(&[0], DType::F32);
    let (x, y, z, b, i, m1, m2, e) = (&x, &y, &z, &b, &i, &m1, &m2, &e);
    let fails = check_panics(vec![
        case!("x + y", ["add", "broadcast"], x + y),
        case!(
            "x - y (owned)",
            ["subtract", "broadcast"],
            x.clone() - y.clone()
        ),
        case!("x * y", ["multiply"], x * y),
        case!("x / y", ["divide"], x / y),
        case!("x % y", ["broadcast"], x % y),
        case!("x.maximum(y)", ["maximum"], x.maximum(y)),
        case!("x.lt(y)", ["broadcast"], x.lt(y)),
        case!(
            "where shapes",
            ["where", "broadcast"],
            lf::where_(&x.gt(0.0), x, y)
        ),
        case!("complex shapes", ["complex"], lf::complex(x, y)),
        case!("- bool", ["negative"], -b),
        case!("! int", ["not"], !i),
        case!("bool - bool", ["subtract"], b - b),
        case!("z < z", ["complex"], z.lt(z)),
        case!("roll axis", ["roll", "axis 2"], x.roll(1, 2)),
        case!("flip axis", ["flip", "axis -3"], x.flip(-3)),
        case!("swapaxes", ["swapaxes", "axis 5"], x.swapaxes(0, 5)),
        case!("squeeze", ["squeeze"], x.squeeze(0)),
        case!("permute", ["permute"], x.permute(&[0, 0])),
        case!("broadcast_to", ["broadcast_to"], x.broadcast_to(&[4, 3])),
        case!("expand_dims", ["expand_dims", "axis 3"], x.expand_dims(3)),
        case!("reshape(-1, 0)", ["reshape", "infer"], x.reshape(&[-1, 0])),
        case!("reshape size", ["reshape"], x.reshape(&[4, -1])),
        case!("slice index", ["slice", "index 5"], x.slice(lf::s![5, ..])),
        case!("pad", ["pad"], x.pad(&[(1, 1); 3], 0.0)),
        case!(
            "concatenate axis",
            ["concatenate", "axis 2"],
            lf::concatenate(&[x, x], 2)
        ),
        case!(
            "concatenate([])",
            ["concatenate", "no arrays"],
            lf::concatenate(&[], 0)
        ),
        case!(
            "concatenate shapes",
            ["concatenate"],
            lf::concatenate(&[x, y], 0)
        ),
        case!("stack([])", ["stack", "no arrays"], lf::stack(&[], 0)),
        case!("stack axis", ["stack", "axis 4"], lf::stack(&[x, x], 4)),
        case!("stack shapes", ["stack"], lf::stack(&[x, y], 0)),
        case!("sum axis", ["sum", "axis 2"], x.sum_axes(&[2], false)),
        case!("mean axis", ["mean", "axis -3"], x.mean_axes(&[-3], true)),
        case!(
            "prod duplicate",
            ["prod", "duplicate"],
            x.prod_axes(&[0, 0], false)
        ),
        case!("max axis", ["max"], x.max_axes(&[7], false)),
        case!("max empty", ["max", "zero-size"], e.max()),
        case!("min complex", ["min", "complex"], z.min()),
        case!("argmax axis", ["argmax"], x.argmax(2)),
        case!("argmin empty", ["argmin"], e.argmin(0)),
        case!("var axis", ["var", "axis 3"], x.var_axes(&[3], 0, false)),
        case!("std axis", ["std", "axis 3"], x.std_axes(&[3], 1, false)),
        case!("any axis", ["any"], x.any_axes(&[9], false)),
        case!("fft axis", ["fft", "axis 2"], fft::fft(x, 2)),
        case!("ifft axis", ["ifft"], fft::ifft(x, -3)),
        case!("rfft axis", ["rfft"], fft::rfft(x, 5)),
        case!("irfftn axis", ["irfftn"], fft::irfftn(x, None, &[4])),
        case!("fft2 of 1-d", ["fft2"], fft::fft2(y)),
        case!("fft empty", ["fft"], fft::fft(e, 0)),
        case!(
            "fftshift axis",
            ["fftshift", "axis 2"],
            fft::fftshift(x, Some(&[2]))
        ),
        case!(
            "ifftshift axis",
            ["ifftshift"],
            fft::ifftshift(x, Some(&[-3]))
        ),
        case!("matmul batch", ["matmul", "batch"], m1.matmul(m2)),
        case!("matmul inner", ["matmul", "inner"], x.matmul(x)),
        case!("matmul 0-d", ["matmul"], x.matmul(&x.sum())),
        case!("dot", ["dot"], linalg::dot(m1, m1)),
        case!("floor complex", ["floor", "complex64"], z.floor()),
        case!("ceil complex", ["ceil"], z.ceil()),
        case!("round complex", ["round"], z.round()),
        case!("trunc complex", ["trunc"], z.trunc()),
        case!("sign bool", ["sign"], b.sign()),
        case!(
            "arange",
            ["arange"],
            Array::arange(0.0, 1.0, 0.0, DType::F32)
        ),
        case!(
            "random dtype",
            ["random"],
            lf::random::normal(&[2], DType::I32, 1)
        ),
        case!(
            "full overflow",
            ["full", "int32"],
            Array::full(&[2], BIG, DType::I32)
        ),
        case!("clip overflow", ["clip", "int32"], i.clip(BIG, BIG)),
        // NumPy: `ValueError: Integers to negative integer powers are not allowed.`
        case!("int ** -1", ["power", "negative", "-1"], i.pow(-1)),
        case!("int powi(-2)", ["power", "negative", "-2"], i.powi(-2)),
        case!("bool ** -1", ["power", "negative"], b.pow(-1)),
        case!(
            "int ** const -3 array",
            ["power", "negative", "-3"],
            i.pow(Array::full(&[3], -3, DType::I64))
        ),
        // NumPy: ZeroDivisionError
        case!(
            "fftfreq(0)",
            ["fftfreq", "n = 0"],
            fft::fftfreq(0, 1.0, DType::F64)
        ),
        case!(
            "fftfreq d=0",
            ["fftfreq", "d = 0"],
            fft::fftfreq(4, 0.0, DType::F64)
        ),
        case!(
            "rfftfreq(0)",
            ["rfftfreq"],
            fft::rfftfreq(0, 1.0, DType::F64)
        ),
        case!(
            "rfftfreq d=-0",
            ["rfftfreq"],
            fft::rfftfreq(3, -0.0, DType::F32)
        ),
    ]);
    assert!(fails.is_empty(), "{} failures: {fails:#?}", fails.len());
}

device_test!(huge_shapes_panic_at_the_caller);
/// Shapes whose element count does not fit `usize` (NumPy: `ValueError: array is too
/// big`) panic at the caller's line in the builders that take them, or give an error in
/// `from_vec`; shape products never wrap.
fn huge_shapes_panic_at_the_caller(_: &Device) {
    const M: usize = usize::MAX;
    let x = Array::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap();
    let h = Array::zeros(&[1 << 40], DType::F32); // fits usize: accepted, lazily
    let (x, h) = (&x, &h);
    let fails = check_panics(vec![
        case!(
            "zeros",
            ["zeros", "usize"],
            Array::zeros(&[M, 2], DType::F32)
        ),
        case!("ones", ["ones", "usize"], Array::ones(&[M, 3], DType::F64)),
        case!(
            "full",
            ["full", "usize"],
            Array::full(&[1 << 32, 1 << 32], 1.0, DType::F32)
        ),
        case!(
            "zeros with a 0",
            ["zeros", "usize"],
            Array::zeros(&[M, M, 0], DType::F32)
        ),
        case!(
            "random",
            ["random", "usize"],
            lf::random::uniform(&[M, M], DType::F32, 3)
        ),
        case!("eye", ["eye", "usize"], Array::eye(1 << 33, DType::F32)),
        case!(
            "arange count",
            ["arange", "usize"],
            Array::arange(0.0, 1e30, 1.0, DType::F64)
        ),
        case!(
            "broadcast_to",
            ["broadcast_to", "usize"],
            x.broadcast_to(&[M, M, 3])
        ),
        // [2^63, 2] wraps to 0 in release builds, which would "match" an empty array
        case!(
            "reshape wrap",
            ["reshape"],
            Array::zeros(&[0], DType::F32).reshape(&[1 << 62, 4])
        ),
        case!("reshape", ["reshape"], x.reshape(&[-1, 1 << 62, 1 << 62])),
        case!(
            "broadcast of two",
            ["usize"],
            h.reshape(&[-1, 1]) + h.reshape(&[1, -1])
        ),
        case!(
            "pad",
            ["usize"],
            Array::zeros(&[M / 2, 2], DType::F32).pad(&[(0, 0), (1, 1)], 0.0)
        ),
    ]);
    assert!(fails.is_empty(), "{} failures: {fails:#?}", fails.len());

    // creation calls that return `Result` say so instead
    let e = Array::from_vec(vec![1.0f32, 2.0, 3.0], &[M, M, 3]).unwrap_err();
    assert!(matches!(e, lf::Error::Shape { op: "from_vec", .. }), "{e}");
    assert!(e.to_string().contains(&format!("{:?}", [M, M, 3])), "{e}");
    let e = Array::from_vec(Vec::<f32>::new(), &[1 << 63, 2, 0]).unwrap_err();
    assert!(matches!(e, lf::Error::Shape { .. }), "{e}");
    // zero-size shapes whose other dimensions fit are fine
    let z = Array::from_vec(Vec::<f32>::new(), &[1 << 40, 0]).unwrap();
    assert_eq!(z.size(), 0);
    assert_eq!(z.sum().item::<f32>().unwrap(), 0.0);
}

device_test!(huge_buffers_are_errors_at_eval);
/// Graphs that are fine to build but whose buffers could not exist give an error at
/// evaluation, before anything is allocated or run; buffers that could exist but do not
/// fit in memory give an out-of-memory error rather than aborting the process.
fn huge_buffers_are_errors_at_eval(_: &Device) {
    let too_big = |r: lf::Result<f64>, what: &str| {
        let e = r.expect_err(what);
        assert!(
            matches!(e, lf::Error::Shape { op: "eval", .. }) && e.to_string().contains("isize"),
            "{what}: {e}"
        );
    };
    // 2^62 f32: the count fits usize, the bytes do not fit isize (this used to hang)
    let z = Array::zeros(&[1 << 61, 2], DType::F32);
    too_big(z.sum().item::<f32>().map(f64::from), "sum of 2^62 zeros");
    too_big(z.eval().map(|_| 0.0), "2^62 zeros");
    // arange counts that fit usize but not memory: an error, not a capacity overflow
    let r = Array::arange(0.0, 1e19, 1.0, DType::I64);
    too_big(r.sum().item::<i64>().map(|v| v as f64), "arange(0, 1e19)");
    too_big(
        Array::arange(0.0, 1e19, 1.0, DType::F64)
            .eval()
            .map(|_| 0.0),
        "arange(0, 1e19) f64",
    );
    // eval of several arrays checks every one
    let ok = Array::zeros(&[3], DType::F32).exp();
    assert!(lf::eval(&[&ok, &z.exp()]).is_err());

    // 2^40 f32 = 4 TiB: representable, but no machine here holds it
    let e = Array::zeros(&[1 << 40], DType::F32)
        .exp()
        .eval()
        .unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("out of memory"), "{msg}");
    assert!(msg.contains(&(4usize << 40).to_string()), "{msg}");
    // the process and the device still work
    assert_eq!(ok.to_vec::<f32>().unwrap(), [1.0; 3]);
}

device_test!(huge_fft_and_matmul_results_are_out_of_memory_errors);
/// FFTs and matrix products whose results (or working buffers) cannot be allocated are
/// out-of-memory errors, not process aborts: small inputs, outputs of several TiB.
fn huge_fft_and_matmul_results_are_out_of_memory_errors(_: &Device) {
    let oom = |r: lf::Result<()>, what: &str| {
        let e = r.expect_err(what);
        assert!(
            matches!(e, lf::Error::OutOfMemory { .. }) && e.to_string().contains("out of memory"),
            "{what}: {e}"
        );
    };
    // irfft of two values to 2^40 points: 8 TiB of f64 (16 TiB of complex work)
    let z = Array::from_vec(vec![lf::c64::new(1.0, 0.0), lf::c64::new(0.5, 0.0)], &[2]).unwrap();
    oom(
        fft::irfft(&z, Some(1 << 40), 0).eval(),
        "irfft to 2^40 points",
    );
    // the same along an axis named twice
    oom(
        fft::irfftn(&z, Some(1 << 40), &[0, 0]).eval(),
        "irfftn to 2^40 points",
    );
    // the outer product of two 2^20-vectors: 2^40 f32, 4 TiB
    let a = Array::ones(&[1 << 20, 1], DType::F32);
    let b = Array::ones(&[1, 1 << 20], DType::F32);
    oom(a.matmul(&b).eval(), "2^20 x 2^20 outer product");
    oom(
        a.astype(DType::C128).matmul(&b.astype(DType::C128)).eval(),
        "complex outer product",
    );
    // the process and the device still work
    let back = fft::irfft(&z, Some(2), 0).to_vec::<f64>().unwrap();
    assert_eq!(back, [0.75, 0.25]);
    let small = Array::ones(&[2, 1], DType::F32).matmul(&Array::ones(&[1, 3], DType::F32));
    assert_eq!(small.to_vec::<f32>().unwrap(), [1.0; 6]);
}

// --- LAZYFUSE_DEVICE, in child processes ---

/// Set in the child process that runs [`env_device_child`]: `1` to try every creation call
/// (catching panics), `uncaught` to make one infallible call and let its panic end the test.
const CHILD: &str = "LAZYFUSE_TEST_ENV_CHILD";

/// The infallible calls on the default device that [`env_device_child`] tries.
const INFALLIBLE: [&str; 7] = [
    "zeros",
    "scalar",
    "arange",
    "uniform",
    "normal",
    "default_device",
    "device_default",
];

/// The default device's behaviour under the child's `LAZYFUSE_DEVICE`, printed as
/// `CHILD key outcome` lines for [`device_environment_is_used_or_fails_loudly`]: `ok DEVICE`,
/// `err MESSAGE` (a fallible call) or `panic MESSAGE` (an infallible one).
#[test]
#[ignore = "run in a child process by the device_environment_* tests"]
fn env_device_child() {
    let Some(mode) = std::env::var_os(CHILD) else {
        return;
    };
    if mode == "uncaught" {
        let r = lf::random::uniform(&[4], DType::F32, 0);
        println!("CHILD uncaught ok {}", r.device());
        return;
    }
    // deliberately not a `device_test!` body: that sets the default device, and this reads
    // the one the environment gives
    let fallible = |k: &str, f: &dyn Fn() -> lf::Result<Device>| match f() {
        Ok(d) => println!("CHILD {k} ok {d}"),
        Err(e) => println!("CHILD {k} err {e}"),
    };
    let infallible = |k: &str, f: &dyn Fn() -> Device| match catch_unwind(AssertUnwindSafe(f)) {
        Ok(d) => println!("CHILD {k} ok {d}"),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            println!("CHILD {k} panic {msg}");
        }
    };
    fallible("from_vec", &|| {
        let a = Array::from_vec(vec![1.0f32, 2.0], &[2])?;
        assert_eq!(a.sum().item::<f32>()?, 3.0);
        Ok(a.device())
    });
    fallible("from_slice", &|| {
        Ok(Array::from_slice(&[3i32], &[1])?.device())
    });
    fallible("try_default", &Device::try_default);
    let calls: [&dyn Fn() -> Device; 7] = [
        &|| {
            let z = Array::zeros(&[3], DType::F32);
            assert_eq!(z.sum().item::<f32>().unwrap(), 0.0);
            z.device()
        },
        &|| {
            let s = Array::scalar(2.5f64);
            assert_eq!((&s * 2.0).item::<f64>().unwrap(), 5.0);
            s.device()
        },
        &|| Array::arange(0.0, 3.0, 1.0, DType::F64).device(),
        &|| lf::random::uniform(&[2], DType::F32, 1).device(),
        &|| lf::random::normal(&[2], DType::F32, 1).device(),
        // closures, not the functions themselves: a call through a function pointer
        // reports a location inside `core`
        #[allow(clippy::redundant_closure)]
        &|| lf::default_device(),
        #[allow(clippy::redundant_closure)]
        &|| Device::default(),
    ];
    for (k, f) in INFALLIBLE.iter().zip(calls) {
        infallible(k, f);
    }
    // an explicit default overrides the variable, however bad it is
    lf::with_default_device(&Device::cpu(), || {
        infallible("scoped_zeros", &|| Array::zeros(&[2], DType::F32).device());
    });
    lf::set_default_device(&Device::cpu());
    infallible("set_zeros", &|| {
        let u = lf::random::uniform(&[2], DType::F32, 1);
        assert!(u
            .to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|x| (0.0..1.0).contains(x)));
        u.device()
    });
    fallible("set_from_vec", &|| {
        Ok(Array::from_vec(vec![1i64], &[1])?.device())
    });
}

/// What the child printed, its stderr, and whether it succeeded.
struct Child {
    out: HashMap<String, String>,
    stderr: String,
    ok: bool,
}

/// Runs [`env_device_child`] in `mode` (see [`CHILD`]) with `LAZYFUSE_DEVICE=device_env`.
fn run_child_in(mode: &str, device_env: &str) -> Child {
    let exe = std::env::current_exe().expect("test binary path");
    let r = std::process::Command::new(exe)
        .args(["env_device_child", "--exact", "--ignored", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(CHILD, mode)
        .env("LAZYFUSE_DEVICE", device_env)
        .output()
        .expect("spawn the test binary");
    let stdout = String::from_utf8_lossy(&r.stdout);
    let out = stdout
        .lines()
        // the harness's "test env_device_child ... " has no line break of its own
        .filter_map(|l| l.split_once("CHILD ").map(|(_, rest)| rest))
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Child {
        out,
        stderr: String::from_utf8_lossy(&r.stderr).into_owned(),
        ok: r.status.success(),
    }
}

fn run_child(device_env: &str) -> Child {
    run_child_in("1", device_env)
}

impl Child {
    fn get(&self, k: &str) -> &str {
        self.out
            .get(k)
            .unwrap_or_else(|| panic!("child printed no {k}; stderr:\n{}", self.stderr))
    }

    /// The child ran to its end; nothing warned.
    fn expect_clean_exit(&self, env: &str) {
        assert!(
            self.ok,
            "LAZYFUSE_DEVICE={env:?}: child failed:\n{}",
            self.stderr
        );
        assert!(!self.stderr.contains("warning"), "{env:?}: {}", self.stderr);
        // the explicit defaults win in every case
        for k in ["scoped_zeros", "set_zeros", "set_from_vec"] {
            assert_eq!(self.get(k), "ok cpu", "{env:?}: {k}");
        }
    }

    /// Every creation call on `dev`.
    fn expect_device(&self, env: &str, dev: &str) {
        self.expect_clean_exit(env);
        for k in ["from_vec", "from_slice", "try_default"]
            .into_iter()
            .chain(INFALLIBLE)
        {
            assert_eq!(self.get(k), format!("ok {dev}"), "{env:?}: {k}");
        }
    }

    /// Every creation call fails: the fallible ones with an error, the infallible ones
    /// with a panic at the caller's line; each message names the variable, its value and
    /// `why`.
    fn expect_failure(&self, env: &str, why: &str) {
        self.expect_clean_exit(env);
        let setting = format!("LAZYFUSE_DEVICE={env:?}: ");
        for k in ["from_vec", "from_slice", "try_default"] {
            let v = self.get(k);
            assert!(
                v.starts_with(&format!("err {setting}")) && v.contains(why),
                "{env:?}: {k}: {v}"
            );
        }
        for k in INFALLIBLE {
            let v = self.get(k);
            assert!(
                v.starts_with(&format!("panic lazyfuse: no default device: {setting}"))
                    && v.contains(why),
                "{env:?}: {k}: {v}"
            );
        }
        assert_eq!(
            self.stderr.matches("panicked at tests/errors.rs:").count(),
            INFALLIBLE.len(),
            "{env:?}: every panic names the caller's line:\n{}",
            self.stderr
        );
    }
}

device_test!(device_environment_names_this_device);
fn device_environment_names_this_device(d: &Device) {
    // this device, spelled loosely
    let env = if d.is_cuda() { " CUDA:0 " } else { " CPU\t" };
    run_child(env).expect_device(env, &d.to_string());
}

#[test]
fn device_environment_is_used_or_fails_loudly() {
    let cuda = Device::cuda_count();
    for env in ["cpu", "CPU", " cpu ", "Cpu", ""] {
        let auto = if env.is_empty() && cuda > 0 {
            "cuda:0"
        } else {
            "cpu"
        };
        run_child(env).expect_device(env, auto);
    }
    for env in ["bogus", "garbage", "cuda:x", "gpu", "cuda:-1", "cpu:0"] {
        run_child(env).expect_failure(env, "not a device; expected cpu, cuda or cuda:N");
    }
    // an ordinal past the last device
    let missing = format!("cuda:{}", cuda.max(7));
    for env in ["cuda", " Cuda ", "cuda:0", missing.as_str()] {
        let c = run_child(env);
        if cuda == 0 {
            c.expect_failure(env, "no CUDA device is usable: ");
        } else if env == missing {
            let has = if cuda == 1 {
                "cuda:0 (1 device)".to_string()
            } else {
                format!("({cuda} devices)")
            };
            c.expect_failure(env, "no such device; this machine has cuda:0");
            c.expect_failure(env, &has);
        } else {
            c.expect_device(env, "cuda:0");
        }
    }
}

/// An infallible builder under a bad `LAZYFUSE_DEVICE` ends the program with a panic that
/// names the setting: a GPU benchmark cannot run on the CPU by accident and exit 0.
#[test]
fn bad_device_environment_ends_an_uncaught_program() {
    for env in ["bogus", "cuda:7"] {
        if env == "cuda:7" && Device::cuda_count() > 7 {
            continue;
        }
        let c = run_child_in("uncaught", env);
        assert!(!c.ok, "{env:?}: the child succeeded:\n{}", c.stderr);
        assert!(!c.out.contains_key("uncaught"), "{env:?}: {:?}", c.out);
        let msg = format!("lazyfuse: no default device: LAZYFUSE_DEVICE={env:?}: ");
        assert!(c.stderr.contains(&msg), "{env:?}: stderr:\n{}", c.stderr);
    }
    // the same program with a good setting succeeds
    let c = run_child_in("uncaught", "cpu");
    assert!(c.ok, "{}", c.stderr);
    assert_eq!(c.out.get("uncaught").map(String::as_str), Some("ok cpu"));
}
