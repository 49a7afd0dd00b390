//! NVRTC compilation of rendered kernels (CUBIN for the device's exact arch, PTX as the
//! fallback), the per-device in-memory kernel cache in front of the on-disk cache, source
//! dumping, and the GPU-less compile check `nvrtc_check`.

use super::disk_cache::{DiskCache, Lookup};
use super::{driver_err, CUDA};
use crate::config::debug_log;
use crate::graph::FxBuild;
use crate::profile::{self, CompileSource};
use crate::stats::bump;
use crate::{Error, Result};
use cudarc::driver::{sys as drv_sys, CudaContext, CudaFunction};
use cudarc::nvrtc::{result as nvrtc, sys as nvrtc_sys, Ptx};
use lazyfuse_codegen::cuda::{render, ArgLayout, RenderOptions, Rendered};
use lazyfuse_codegen::Kernel;
use std::collections::{HashMap, HashSet};
use std::ffi::{c_char, c_int, CString};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

/// Arch `nvrtc_check` compiles for: the H200 the project targets.
const CHECK_ARCH: &str = "--gpu-architecture=sm_90";
/// Options besides the architecture. No fast math: results must match the CPU backend.
const BASE_OPTIONS: &[&str] = &["--std=c++17"];

/// Locks a mutex, ignoring poisoning (the data behind our mutexes stays consistent even when
/// a holder panicked: every update is a single insert or replace).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------------------------
// NVRTC glue
// ---------------------------------------------------------------------------------------

/// What a compile produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum ImageKind {
    /// A CUBIN (ELF) for one exact architecture.
    Cubin,
    /// NUL-terminated PTX text, JIT-compiled by the driver at load.
    Ptx,
}

/// A compiled module image, ready for `cuModuleLoadData`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Image {
    /// CUBIN or PTX.
    pub kind: ImageKind,
    /// The image bytes (PTX includes its terminating NUL).
    pub bytes: Vec<u8>,
}

/// Why NVRTC produced no image.
#[derive(Debug)]
struct CompileFailure {
    /// True when the source itself was rejected (another target will not help).
    source_error: bool,
    /// NVRTC's status.
    status: String,
    /// The compiler log.
    log: String,
}

/// Which image to extract after compiling.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Output {
    None,
    Cubin,
    Ptx,
}

/// Owns an `nvrtcProgram`, destroying it on every path.
struct Program(nvrtc_sys::nvrtcProgram);

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the handle came from `create_program` and is destroyed only here, once.
        let _ = unsafe { nvrtc::destroy_program(self.0) };
    }
}

/// Whether libnvrtc can be loaded (checked once; never panics).
pub(super) fn nvrtc_present() -> bool {
    *CUDA.nvrtc.get_or_init(|| {
        // SAFETY: `is_culib_present` only tries to dlopen the library candidates.
        std::panic::catch_unwind(|| unsafe { nvrtc_sys::is_culib_present() }).unwrap_or(false)
    })
}

/// NVRTC's (major, minor) version, `None` when it cannot be queried.
pub(super) fn nvrtc_version() -> Option<(i32, i32)> {
    *CUDA.nvrtc_version.get_or_init(|| {
        if !nvrtc_present() {
            return None;
        }
        let (mut major, mut minor): (c_int, c_int) = (0, 0);
        // SAFETY: both pointers are valid for a write of one c_int.
        let r = unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) };
        r.result().ok().map(|_| (major, minor))
    })
}

/// The SM versions (e.g. 90) this NVRTC can target; empty when it cannot say.
fn supported_archs() -> &'static [i32] {
    CUDA.nvrtc_archs.get_or_init(|| {
        if !nvrtc_present() {
            return Vec::new(); // cudarc would panic calling into a missing library
        }
        let mut n: c_int = 0;
        // SAFETY: `n` is valid for a write of one c_int.
        if unsafe { nvrtc_sys::nvrtcGetNumSupportedArchs(&mut n) }
            .result()
            .is_err()
            || n <= 0
        {
            return Vec::new();
        }
        let mut archs = vec![0 as c_int; n as usize];
        // SAFETY: `archs` holds exactly the `n` entries NVRTC said it will write.
        match unsafe { nvrtc_sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }.result() {
            Ok(()) => archs,
            Err(_) => Vec::new(),
        }
    })
}

fn c_chars_to_string(v: &[c_char]) -> String {
    let bytes: Vec<u8> = v.iter().map(|&c| c as u8).take_while(|&b| b != 0).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Compiles `source` with `options` and extracts `out`.
fn nvrtc_compile(
    source: &str,
    name: &str,
    options: &[String],
    out: Output,
) -> std::result::Result<Option<Image>, CompileFailure> {
    let fail = |source_error, status: String, log: String| CompileFailure {
        source_error,
        status,
        log,
    };
    let src = CString::new(source).map_err(|_| {
        fail(
            true,
            "invalid source".into(),
            "source holds a NUL byte".into(),
        )
    })?;
    let cname = CString::new(name)
        .map_err(|_| fail(true, "invalid name".into(), "name holds a NUL byte".into()))?;
    let prog = Program(
        nvrtc::create_program(&src, Some(&cname))
            .map_err(|e| fail(false, format!("nvrtcCreateProgram: {e:?}"), String::new()))?,
    );
    // SAFETY: `prog.0` is a live program; the options hold no NUL (built from literals and
    // integers), so cudarc's CString conversion cannot fail.
    if let Err(e) = unsafe { nvrtc::compile_program(prog.0, options) } {
        // SAFETY: `prog.0` is a live program.
        let log = unsafe { nvrtc::get_program_log(prog.0) }
            .map(|v| c_chars_to_string(&v))
            .unwrap_or_default();
        let source_error = e.0 == nvrtc_sys::nvrtcResult::NVRTC_ERROR_COMPILATION;
        return Err(fail(source_error, format!("{e:?}"), log));
    }
    match out {
        Output::None => Ok(None),
        Output::Ptx => {
            // SAFETY: `prog.0` is a live, successfully compiled program.
            let ptx = unsafe { nvrtc::get_ptx(prog.0) }
                .map_err(|e| fail(false, format!("nvrtcGetPTX: {e:?}"), String::new()))?;
            let mut bytes: Vec<u8> = ptx
                .iter()
                .map(|&c| c as u8)
                .take_while(|&b| b != 0)
                .collect();
            bytes.push(0);
            Ok(Some(Image {
                kind: ImageKind::Ptx,
                bytes,
            }))
        }
        Output::Cubin => {
            let mut size: usize = 0;
            // SAFETY: `prog.0` is a live, compiled program; `size` is valid for one write.
            unsafe { nvrtc_sys::nvrtcGetCUBINSize(prog.0, &mut size) }
                .result()
                .map_err(|e| fail(false, format!("nvrtcGetCUBINSize: {e:?}"), String::new()))?;
            if size == 0 {
                return Err(fail(false, "empty CUBIN".into(), String::new()));
            }
            let mut bytes = vec![0u8; size];
            // SAFETY: `bytes` has room for the `size` bytes NVRTC reported.
            unsafe { nvrtc_sys::nvrtcGetCUBIN(prog.0, bytes.as_mut_ptr() as *mut c_char) }
                .result()
                .map_err(|e| fail(false, format!("nvrtcGetCUBIN: {e:?}"), String::new()))?;
            Ok(Some(Image {
                kind: ImageKind::Cubin,
                bytes,
            }))
        }
    }
}

fn options_for(arch: &str) -> Vec<String> {
    std::iter::once(arch.to_string())
        .chain(BASE_OPTIONS.iter().map(|s| s.to_string()))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Compile targets and source dumps
// ---------------------------------------------------------------------------------------

/// How kernels for one device are compiled.
#[derive(Clone, Debug)]
pub(super) struct Target {
    /// SM version compiled for (`90` for sm_90); the device's own when NVRTC supports it.
    sm: i32,
    /// Whether a CUBIN is attempted first (only for the device's exact arch).
    cubin: bool,
}

impl Target {
    /// The target for a device of compute capability `major.minor`: a CUBIN for exactly
    /// that arch when NVRTC lists it (or lists nothing), else PTX for the newest arch NVRTC
    /// supports below it (the driver JIT-compiles PTX forward).
    pub(super) fn for_device(major: i32, minor: i32) -> Target {
        let sm = major * 10 + minor;
        let archs = supported_archs();
        if archs.is_empty() || archs.contains(&sm) {
            return Target { sm, cubin: true };
        }
        match archs.iter().copied().filter(|&a| a < sm).max() {
            Some(a) => Target {
                sm: a,
                cubin: false,
            },
            None => Target { sm, cubin: true },
        }
    }

    /// A stable description for cache keys and logs.
    fn describe(&self) -> String {
        format!("sm_{}{}", self.sm, if self.cubin { "" } else { " (ptx)" })
    }
}

/// `LAZYFUSE_DUMP_DIR`, read once.
fn dump_dir() -> Option<&'static PathBuf> {
    crate::config::CONFIG.dump_dir()
}

/// Writes the source to `LAZYFUSE_DUMP_DIR/<entry>.cu` when that is set.
fn dump_if_asked(r: &Rendered) -> Option<PathBuf> {
    let dir = dump_dir()?;
    let path = dir.join(format!("{}.cu", r.entry));
    match std::fs::create_dir_all(dir).and_then(|_| std::fs::write(&path, &r.source)) {
        Ok(()) => Some(path),
        Err(e) => {
            debug_log!(1, "cannot dump {} to {}: {e}", r.entry, path.display());
            None
        }
    }
}

/// Where a failing kernel's source is: the dump directory, else a file in the temp dir.
fn source_path_for_error(r: &Rendered, dumped: Option<PathBuf>) -> String {
    if let Some(p) = dumped {
        return p.display().to_string();
    }
    let path = std::env::temp_dir().join(format!("lazyfuse-{}.cu", r.entry));
    match std::fs::write(&path, &r.source) {
        Ok(()) => path.display().to_string(),
        Err(e) => format!("(not written: {}: {e})", path.display()),
    }
}

/// Renders `kernel`, logs and dumps the source.
fn render_kernel(kernel: &Kernel, opts: &RenderOptions) -> Result<(Rendered, Option<PathBuf>)> {
    let r = render(kernel, opts).map_err(|e| Error::internal("render", e))?;
    if r.entry.is_empty()
        || !r
            .entry
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(Error::internal(
            "render",
            format!("bad entry name {:?}", r.entry),
        ));
    }
    debug_log!(5, "source of {} ({opts:?}):\n{}", r.entry, r.source);
    let dumped = dump_if_asked(&r);
    Ok((r, dumped))
}

fn compile_error(
    r: &Rendered,
    dumped: Option<PathBuf>,
    options: Vec<String>,
    f: CompileFailure,
) -> Error {
    let log = if f.log.is_empty() {
        f.status
    } else {
        format!("{}\n{}", f.status, f.log)
    };
    Error::Compile {
        kernel: r.entry.clone(),
        options,
        log,
        source_path: source_path_for_error(r, dumped),
    }
}

/// Compiles for `target`: CUBIN first when the target allows, PTX when that fails for a
/// reason other than the source.
pub(super) fn compile_for(
    target: &Target,
    r: &Rendered,
    dumped: &Option<PathBuf>,
) -> Result<Image> {
    let name = format!("{}.cu", r.entry);
    if target.cubin {
        let options = options_for(&format!("--gpu-architecture=sm_{}", target.sm));
        match nvrtc_compile(&r.source, &name, &options, Output::Cubin) {
            Ok(Some(img)) => return Ok(img),
            Ok(None) => {}
            Err(f) if f.source_error => return Err(compile_error(r, dumped.clone(), options, f)),
            Err(f) => debug_log!(2, "CUBIN for {} failed ({}); trying PTX", r.entry, f.status),
        }
    }
    let options = options_for(&format!("--gpu-architecture=compute_{}", target.sm));
    match nvrtc_compile(&r.source, &name, &options, Output::Ptx) {
        Ok(Some(img)) => Ok(img),
        Ok(None) => Err(Error::internal("nvrtc", "no PTX produced")),
        Err(f) => Err(compile_error(r, dumped.clone(), options, f)),
    }
}

// ---------------------------------------------------------------------------------------
// Loaded kernels and the in-memory cache
// ---------------------------------------------------------------------------------------

/// A kernel ready to launch.
#[derive(Debug)]
pub(super) struct LoadedKernel {
    /// The function (holds its module alive).
    pub func: CudaFunction,
    /// The rendered source and its launch shape.
    pub rendered: Rendered,
    /// Bytes of the kernel's single parameter, when the driver can report it.
    pub param_size: Option<usize>,
    /// Registers per thread, as the driver reports them.
    pub regs: Option<u32>,
    /// Blocks of the rendered block size that fit on one multiprocessor at once (the
    /// driver's occupancy calculation from the register and shared-memory use).
    pub blocks_per_sm: Option<u32>,
}

/// Whether the driver has `cuFuncGetParamInfo` (CUDA 12.4+).
fn driver_has_param_info() -> bool {
    *CUDA.param_info.get_or_init(|| {
        let mut v: c_int = 0;
        // SAFETY: `v` is valid for one write; the driver library is loaded (a context exists).
        let ok = unsafe { drv_sys::cuDriverGetVersion(&mut v) }
            .result()
            .is_ok();
        ok && v >= 12040
    })
}

pub(super) fn load_image(
    ctx: &Arc<CudaContext>,
    img: &Image,
    r: &Rendered,
) -> Result<LoadedKernel> {
    let module = ctx
        .load_module(Ptx::from_binary(img.bytes.clone()))
        .map_err(driver_err("cuModuleLoadData"))?;
    let func = module
        .load_function(&r.entry)
        .map_err(driver_err("cuModuleGetFunction"))?;
    let param_size = if driver_has_param_info() {
        let (mut offset, mut size) = (0usize, 0usize);
        // SAFETY: `func` is a live function of a loaded module; both out-pointers are valid.
        let res =
            unsafe { drv_sys::cuFuncGetParamInfo(func.cu_function(), 0, &mut offset, &mut size) };
        res.result().ok().map(|_| size)
    } else {
        None
    };
    let attr = |a: drv_sys::CUfunction_attribute| {
        let mut v: c_int = 0;
        // SAFETY: `func` is a live function of a loaded module; `v` is valid for one write.
        let res = unsafe { drv_sys::cuFuncGetAttribute(&mut v, a, func.cu_function()) };
        res.result().ok().map(|_| v.max(0) as u32)
    };
    let regs = attr(drv_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS);
    let local_bytes = attr(drv_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    let blocks_per_sm = {
        let mut v: c_int = 0;
        let block = r.block.max(1) as c_int;
        // SAFETY: as above; the block size is the one every launch of this kernel uses.
        let res = unsafe {
            drv_sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                &mut v,
                func.cu_function(),
                block,
                0,
            )
        };
        res.result().ok().filter(|_| v > 0).map(|_| v as u32)
    };
    debug_log!(
        2,
        "loaded {}: {} registers, {} local bytes per thread, {} blocks of {} per SM, {} element(s) per thread",
        r.entry,
        regs.map_or("?".into(), |v| v.to_string()),
        local_bytes.map_or("?".into(), |v| v.to_string()),
        blocks_per_sm.map_or("?".into(), |v| v.to_string()),
        r.block,
        r.per_thread
    );
    Ok(LoadedKernel {
        func,
        rendered: r.clone(),
        param_size,
        regs,
        blocks_per_sm,
    })
}

/// Compiled kernels of one device: an in-memory map in front of the disk cache and NVRTC.
pub(super) struct KernelCache {
    /// Keyed by options, then by the kernel itself: a lookup hashes the kernel in place,
    /// with no key string built per launch.
    map: Mutex<HashMap<RenderOptions, HashMap<Kernel, Arc<LoadedKernel>>>>,
    /// Serializes compiles so that two threads missing on one kernel compile it once,
    /// without blocking lookups of cached kernels.
    compile_lock: Mutex<()>,
    target: Target,
    disk: Option<DiskCache>,
    /// Launch-ready entries keyed by the address of a plan's shared kernel (each entry holds
    /// that `Arc`, so the address cannot be reused while the entry lives): a cached plan's
    /// launch finds its kernel without hashing or comparing the IR, under a shared lock.
    front: RwLock<HashMap<(usize, RenderOptions), Prepared, FxBuild>>,
    /// Generated FFT passes by their structure.
    fft: Mutex<HashMap<lazyfuse_codegen::fft::FftPass, Arc<LoadedKernel>>>,
    /// Generated FFT passes with fused work by the pass and the addresses of the plan's
    /// prologue and epilogue (each entry holds those `Arc`s, so the addresses are not
    /// reused while it lives): a cached plan's launch finds its pass without hashing IR.
    fft_front: Mutex<FusedFront>,
    /// The same passes by their fused work's normal forms (a new plan with equal work
    /// compiles nothing).
    fft_fused: Mutex<HashMap<FusedKey, Arc<LoadedKernel>>>,
    /// Scatter-add kernels (`lazyfuse_codegen::cuda::scatter`) by entry name.
    scatter: Mutex<HashMap<String, Arc<LoadedKernel>>>,
}

/// The fused work of a generated pass: the prologue, the epilogue with its value input
/// and first shift parameter, and a round trip's middle work with its value input
/// (`lazyfuse_codegen::cuda::fft::Fused`).
pub(super) type FusedWork<'a> = (
    Option<&'a Arc<Kernel>>,
    Option<(&'a Arc<Kernel>, u32, u32)>,
    Option<(&'a Arc<Kernel>, u32)>,
);

/// [`KernelCache::fft_fused`]'s key.
type FusedKey = (
    lazyfuse_codegen::fft::FftPass,
    Option<Kernel>,
    Option<(Kernel, u32, u32)>,
    Option<(Kernel, u32)>,
);

/// [`KernelCache::fft_front`]'s map: by the pass and the work's addresses, the work
/// (kept alive) and the loaded pass.
type FusedFront = HashMap<
    (lazyfuse_codegen::fft::FftPass, usize, usize, usize),
    (Vec<Arc<Kernel>>, Arc<LoadedKernel>),
    FxBuild,
>;

/// A loaded kernel with what every launch of it needs, resolved once.
#[derive(Clone)]
pub(super) struct Prepared {
    /// Keeps the keyed address alive.
    _kernel: Arc<Kernel>,
    pub(super) loaded: Arc<LoadedKernel>,
    /// The argument struct's layout (offsets of every field).
    layout: Arc<ArgLayout>,
}

impl Prepared {
    /// The packed argument struct of one launch of `kernel` (the kernel this entry was
    /// prepared for) with these device pointers, launch arguments and reduction split.
    pub(super) fn pack(
        &self,
        kernel: &Kernel,
        opts: &RenderOptions,
        inputs: &[u64],
        outputs: &[u64],
        args: &lazyfuse_codegen::LaunchArgs,
        red: &lazyfuse_codegen::cuda::ReduceLaunch,
    ) -> Result<Vec<u8>> {
        lazyfuse_codegen::cuda::pack_args_prepared(
            kernel,
            &self.layout,
            opts,
            inputs,
            outputs,
            args,
            red,
        )
        .map_err(|e| Error::internal("pack_args", e))
    }
}

/// Most entries of the launch front cache before it starts over.
const FRONT_MAX: usize = 8192;

impl KernelCache {
    /// An empty cache compiling for `target`, persisting to `disk`.
    pub(super) fn new(target: Target, disk: Option<DiskCache>) -> KernelCache {
        KernelCache {
            map: Mutex::new(HashMap::new()),
            compile_lock: Mutex::new(()),
            target,
            disk,
            front: RwLock::new(HashMap::default()),
            fft: Mutex::new(HashMap::new()),
            fft_front: Mutex::new(HashMap::default()),
            fft_fused: Mutex::new(HashMap::new()),
            scatter: Mutex::new(HashMap::new()),
        }
    }

    /// The disk cache directory, if any.
    pub(super) fn disk_dir(&self) -> Option<&std::path::Path> {
        self.disk.as_ref().map(|d| d.dir())
    }

    /// Drops every loaded kernel of this cache (their modules unload once no launch holds
    /// them); the disk cache is kept.
    pub(super) fn clear(&self) {
        self.front
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        lock(&self.map).clear();
        lock(&self.fft).clear();
        lock(&self.fft_front).clear();
        lock(&self.fft_fused).clear();
    }

    /// The launch-ready kernel for a plan's shared `kernel`: by address from the front
    /// cache, else through [`KernelCache::get`] (memory, disk, NVRTC) and remembered.
    pub(super) fn prepared(
        &self,
        ctx: &Arc<CudaContext>,
        kernel: &Arc<Kernel>,
        opts: &RenderOptions,
    ) -> Result<Prepared> {
        let key = (Arc::as_ptr(kernel) as usize, *opts);
        let hit = self
            .front
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        if let Some(p) = hit {
            bump::kernel_cache_hits(1);
            if profile::on() {
                let entry = &p.loaded.rendered.entry;
                profile::note_compile(entry, CompileSource::MemoryHit, Duration::ZERO);
            }
            return Ok(p);
        }
        let loaded = self.get(ctx, kernel, opts)?;
        let layout = Arc::new(
            lazyfuse_codegen::cuda::arg_layout(kernel)
                .map_err(|e| Error::internal("arg_layout", e))?,
        );
        let p = Prepared {
            _kernel: kernel.clone(),
            loaded,
            layout,
        };
        let mut front = self.front.write().unwrap_or_else(|e| e.into_inner());
        if front.len() >= FRONT_MAX {
            front.clear();
        }
        front.insert(key, p.clone());
        Ok(p)
    }

    fn lookup(&self, kernel: &Kernel, opts: &RenderOptions) -> Option<Arc<LoadedKernel>> {
        lock(&self.map).get(opts)?.get(kernel).cloned()
    }

    /// The loaded kernel for `(kernel, opts)`: from memory, else from disk, else compiled.
    pub(super) fn get(
        &self,
        ctx: &Arc<CudaContext>,
        kernel: &Kernel,
        opts: &RenderOptions,
    ) -> Result<Arc<LoadedKernel>> {
        if let Some(k) = self.lookup(kernel, opts) {
            bump::kernel_cache_hits(1);
            debug_log!(4, "kernel {}: memory cache hit", k.rendered.entry);
            profile::note_compile(&k.rendered.entry, CompileSource::MemoryHit, Duration::ZERO);
            return Ok(k);
        }
        let _compiling = lock(&self.compile_lock);
        if let Some(k) = self.lookup(kernel, opts) {
            // Another thread compiled it while this one waited.
            bump::kernel_cache_hits(1);
            profile::note_compile(&k.rendered.entry, CompileSource::MemoryHit, Duration::ZERO);
            return Ok(k);
        }
        let loaded = Arc::new(self.build(ctx, kernel, opts)?);
        lock(&self.map)
            .entry(*opts)
            .or_default()
            .insert(kernel.clone(), loaded.clone());
        Ok(loaded)
    }

    /// The text identifying a compiled image on disk: everything the bytes depend on. The
    /// rendered source (not the IR key) is part of it, so a changed renderer never loads a
    /// stale image.
    fn disk_key(&self, r: &Rendered) -> String {
        let (maj, min) = nvrtc_version().unwrap_or((0, 0));
        format!(
            "target={}\nnvrtc={maj}.{min}\noptions={BASE_OPTIONS:?}\nentry={}\n{}",
            self.target.describe(),
            r.entry,
            r.source
        )
    }

    fn build(
        &self,
        ctx: &Arc<CudaContext>,
        kernel: &Kernel,
        opts: &RenderOptions,
    ) -> Result<LoadedKernel> {
        let t0 = Instant::now();
        let (r, dumped) = render_kernel(kernel, opts)?;
        self.build_rendered(ctx, t0, r, dumped, || {
            if crate::config::debug_level() >= 2 {
                let map = lock(&self.map);
                let cached = map
                    .iter()
                    .flat_map(|(o, m)| m.keys().map(move |k| (k, o.index32)));
                crate::explain::kernel_miss(kernel, opts.index32, cached)
            } else {
                String::new()
            }
        })
    }

    /// The loaded kernel of the generated FFT pass `pass`: from memory, else from disk,
    /// else compiled (like [`KernelCache::get`], keyed by the pass's structure).
    pub(super) fn get_fft(
        &self,
        ctx: &Arc<CudaContext>,
        pass: &lazyfuse_codegen::fft::FftPass,
    ) -> Result<Arc<LoadedKernel>> {
        let hit = |k: &Arc<LoadedKernel>| {
            bump::kernel_cache_hits(1);
            profile::note_compile(&k.rendered.entry, CompileSource::MemoryHit, Duration::ZERO);
        };
        if let Some(k) = lock(&self.fft).get(pass).cloned() {
            hit(&k);
            return Ok(k);
        }
        let _compiling = lock(&self.compile_lock);
        if let Some(k) = lock(&self.fft).get(pass).cloned() {
            hit(&k); // another thread compiled it while this one waited
            return Ok(k);
        }
        let t0 = Instant::now();
        let r = lazyfuse_codegen::cuda::fft::render(pass);
        debug_log!(5, "source of {}:\n{}", r.entry, r.source);
        let dumped = dump_if_asked(&r);
        let loaded =
            Arc::new(self.build_rendered(ctx, t0, r, dumped, || "a generated FFT pass".into())?);
        lock(&self.fft).insert(pass.clone(), loaded.clone());
        Ok(loaded)
    }

    /// The loaded kernel `entry` of the scatter-add step (`lazyfuse_codegen::cuda::scatter`:
    /// the adding kernel of a dtype, or the zeroing kernel), rendered by `render` and built
    /// like [`KernelCache::get_fft`] on a miss; `None` when `render` gives nothing.
    pub(super) fn get_scatter(
        &self,
        ctx: &Arc<CudaContext>,
        entry: &str,
        render: impl FnOnce() -> Option<Rendered>,
    ) -> Result<Option<Arc<LoadedKernel>>> {
        if let Some(k) = lock(&self.scatter).get(entry).cloned() {
            bump::kernel_cache_hits(1);
            return Ok(Some(k));
        }
        let _compiling = lock(&self.compile_lock);
        if let Some(k) = lock(&self.scatter).get(entry).cloned() {
            return Ok(Some(k));
        }
        let t0 = Instant::now();
        let Some(r) = render() else {
            return Ok(None);
        };
        debug_log!(5, "source of {}:\n{}", r.entry, r.source);
        let dumped = dump_if_asked(&r);
        let loaded =
            Arc::new(self.build_rendered(ctx, t0, r, dumped, || "a scatter-add kernel".into())?);
        lock(&self.scatter).insert(entry.to_string(), loaded.clone());
        Ok(Some(loaded))
    }

    /// The loaded kernel of the generated FFT pass `pass` with the fused `work`
    /// ([`lazyfuse_codegen::cuda::fft::render_fused`]): by the work's addresses, else by
    /// its normal form, else rendered and built like [`KernelCache::get_fft`].
    pub(super) fn get_fft_fused(
        &self,
        ctx: &Arc<CudaContext>,
        pass: &lazyfuse_codegen::fft::FftPass,
        work: FusedWork,
    ) -> Result<Arc<LoadedKernel>> {
        use lazyfuse_codegen::cuda::fft::{render_fused, Epilogue, Fused, Mid};
        let (pro, epi, mid) = work;
        let addr = |k: Option<&Arc<Kernel>>| k.map_or(0, |k| Arc::as_ptr(k) as usize);
        let fkey = (
            pass.clone(),
            addr(pro),
            addr(epi.map(|e| e.0)),
            addr(mid.map(|m| m.0)),
        );
        if let Some((_, k)) = lock(&self.fft_front).get(&fkey) {
            bump::kernel_cache_hits(1);
            return Ok(k.clone());
        }
        let key: FusedKey = (
            pass.clone(),
            pro.map(|k| k.normalize()),
            epi.map(|(k, v, s)| (k.normalize(), v, s)),
            mid.map(|(k, v)| (k.normalize(), v)),
        );
        let found = lock(&self.fft_fused).get(&key).cloned();
        let loaded = match found {
            Some(k) => k,
            None => {
                let _compiling = lock(&self.compile_lock);
                let again = lock(&self.fft_fused).get(&key).cloned();
                match again {
                    Some(k) => k,
                    None => {
                        let t0 = Instant::now();
                        let fused = Fused {
                            prologue: pro.map(|k| &**k),
                            epilogue: epi.map(|(k, value_input, shift_param)| Epilogue {
                                kernel: k,
                                value_input,
                                shift_param,
                            }),
                            mid: mid.map(|(k, value_input)| Mid {
                                kernel: k,
                                value_input,
                            }),
                        };
                        let r = render_fused(pass, &fused)
                            .map_err(|e| Error::internal("render fused fft", e))?;
                        debug_log!(5, "source of {}:\n{}", r.entry, r.source);
                        let dumped = dump_if_asked(&r);
                        let loaded = Arc::new(self.build_rendered(ctx, t0, r, dumped, || {
                            "a generated FFT pass with fused elementwise work".into()
                        })?);
                        lock(&self.fft_fused).insert(key, loaded.clone());
                        loaded
                    }
                }
            }
        };
        let kept: Vec<Arc<Kernel>> = pro
            .into_iter()
            .chain(epi.map(|e| e.0))
            .chain(mid.map(|m| m.0))
            .cloned()
            .collect();
        let mut front = lock(&self.fft_front);
        if front.len() >= FRONT_MAX {
            front.clear();
        }
        front.insert(fkey, (kept, loaded.clone()));
        Ok(loaded)
    }

    /// Loads the rendered `r` from the disk cache, else compiles and stores it; `why`
    /// explains a compile at debug level 2.
    fn build_rendered(
        &self,
        ctx: &Arc<CudaContext>,
        t0: Instant,
        r: Rendered,
        dumped: Option<PathBuf>,
        why: impl FnOnce() -> String,
    ) -> Result<LoadedKernel> {
        let _range = crate::nvtx::range_with(|| format!("lazyfuse.compile {}", r.entry));
        let key = self.disk_key(&r);
        let reason = match &self.disk {
            None => "not in memory; no disk cache".to_string(),
            Some(disk) => match disk.load(&key) {
                Lookup::Hit(img) => match load_image(ctx, &img, &r) {
                    Ok(k) => {
                        bump::disk_cache_hits(1);
                        profile::note_compile(&r.entry, CompileSource::DiskHit, t0.elapsed());
                        debug_log!(
                            2,
                            "kernel {}: disk cache hit ({:?}, {} bytes) in {:.2?}",
                            r.entry,
                            img.kind,
                            img.bytes.len(),
                            t0.elapsed()
                        );
                        return Ok(k);
                    }
                    Err(e) => format!("disk image failed to load ({e})"),
                },
                Lookup::Miss(why) => format!("not in memory; disk: {why}"),
            },
        };
        if !nvrtc_present() {
            return Err(Error::NoCuda(format!(
                "kernel {} must be compiled but libnvrtc cannot be loaded",
                r.entry
            )));
        }
        let t1 = Instant::now();
        let img = compile_for(&self.target, &r, &dumped)?;
        let compiled_in = t1.elapsed();
        bump::kernels_compiled(1);
        let loaded = load_image(ctx, &img, &r)?;
        bump::compile_time_ns(t1.elapsed().as_nanos() as u64);
        profile::note_compile(&r.entry, CompileSource::Compiled, t0.elapsed());
        let why = why();
        debug_log!(
            2,
            "kernel {}: compiled ({reason}; {why}) for {} to {:?} ({} bytes) in {compiled_in:.2?}, loaded in {:.2?}",
            r.entry,
            self.target.describe(),
            img.kind,
            img.bytes.len(),
            t1.elapsed() - compiled_in
        );
        if let Some(disk) = &self.disk {
            disk.store(&key, &img);
        }
        Ok(loaded)
    }
}

// ---------------------------------------------------------------------------------------
// Compile check without a GPU
// ---------------------------------------------------------------------------------------

/// Compile-checks `kernel` with NVRTC (no driver or GPU needed): renders it with the options
/// a launch would use (32-bit indices) and compiles for `sm_90`. `Ok(true)` when it compiled,
/// `Ok(false)` when NVRTC is not installed, `Error::Compile` (with the log and the dumped
/// source) when NVRTC rejects it. Each distinct kernel is checked once per process.
pub fn nvrtc_check(kernel: &Kernel) -> Result<bool> {
    if !nvrtc_present() {
        return Ok(false);
    }
    if lock(&CUDA.checked)
        .as_ref()
        .is_some_and(|s| s.contains(kernel))
    {
        return Ok(true);
    }
    let opts = RenderOptions {
        index32: true,
        scalar: false,
    };
    let (r, dumped) = render_kernel(kernel, &opts)?;
    let options = options_for(CHECK_ARCH);
    let t0 = Instant::now();
    nvrtc_compile(
        &r.source,
        &format!("{}.cu", r.entry),
        &options,
        Output::None,
    )
    .map_err(|f| compile_error(&r, dumped, options, f))?;
    debug_log!(3, "nvrtc_check {}: ok in {:.2?}", r.entry, t0.elapsed());
    lock(&CUDA.checked)
        .get_or_insert_with(HashSet::new)
        .insert(kernel.clone());
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
struct __align__(8) Args { const float* a; float* out; long long n; };
extern "C" __global__ void lf_test_add(const Args args) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    for (; i < args.n; i += (long long)gridDim.x * blockDim.x) args.out[i] = args.a[i] + 1.0f;
}
"#;

    /// NVRTC is optional on the development machine; these run when it can be loaded.
    fn have_nvrtc() -> bool {
        let ok = nvrtc_present();
        if !ok {
            eprintln!("libnvrtc not found: NVRTC tests skipped");
        }
        ok
    }

    #[test]
    fn cubin_and_ptx_for_sm90() {
        if !have_nvrtc() {
            return;
        }
        let opts = options_for("--gpu-architecture=sm_90");
        let img = nvrtc_compile(GOOD, "t.cu", &opts, Output::Cubin)
            .unwrap()
            .unwrap();
        assert_eq!(img.kind, ImageKind::Cubin);
        assert_eq!(&img.bytes[..4], b"\x7fELF");
        let opts = options_for("--gpu-architecture=compute_90");
        let img = nvrtc_compile(GOOD, "t.cu", &opts, Output::Ptx)
            .unwrap()
            .unwrap();
        assert_eq!(img.kind, ImageKind::Ptx);
        assert_eq!(img.bytes.last(), Some(&0));
        let text = String::from_utf8_lossy(&img.bytes);
        assert!(text.contains(".entry lf_test_add"), "{text}");
        // A virtual arch has no CUBIN: a fallback-worthy failure, not a source error.
        let f = nvrtc_compile(GOOD, "t.cu", &opts, Output::Cubin).unwrap_err();
        assert!(!f.source_error);
    }

    #[test]
    fn target_falls_back_to_cubin_then_ptx() {
        if !have_nvrtc() {
            return;
        }
        assert!(nvrtc_version().is_some());
        let t = Target::for_device(9, 0);
        assert_eq!(t.sm, 90);
        assert!(t.cubin);
        let r = Rendered {
            source: GOOD.into(),
            entry: "lf_test_add".into(),
            block: 256,
            per_thread: 1,
        };
        assert_eq!(compile_for(&t, &r, &None).unwrap().kind, ImageKind::Cubin);
        let ptx_only = Target {
            sm: 90,
            cubin: false,
        };
        assert_eq!(
            compile_for(&ptx_only, &r, &None).unwrap().kind,
            ImageKind::Ptx
        );
        // An arch newer than NVRTC knows compiles PTX for the newest one it knows.
        let future = Target::for_device(99, 9);
        assert!(!future.cubin && future.sm < 999, "{future:?}");
    }

    #[test]
    fn compile_error_carries_log_options_and_source() {
        if !have_nvrtc() {
            return;
        }
        let r = Rendered {
            source: "extern \"C\" __global__ void lf_test_bad() { undefined_thing = 1; }".into(),
            entry: "lf_test_bad".into(),
            block: 256,
            per_thread: 1,
        };
        let err = compile_for(
            &Target {
                sm: 90,
                cubin: true,
            },
            &r,
            &None,
        )
        .unwrap_err();
        match err {
            Error::Compile {
                kernel,
                options,
                log,
                source_path,
            } => {
                assert_eq!(kernel, "lf_test_bad");
                assert!(options.iter().any(|o| o == "--gpu-architecture=sm_90"));
                assert!(log.contains("undefined_thing"), "{log}");
                let dumped = std::fs::read_to_string(&source_path).unwrap();
                assert_eq!(dumped, r.source);
            }
            e => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn nvrtc_check_reports_absence_or_renders() {
        // Without NVRTC this is Ok(false); with it, the renderer's result decides (an
        // unwritten renderer is an internal error, never a panic).
        use lazyfuse_codegen::{Builder, DType, Inst};
        let mut b = Builder::new(1);
        let input = b.input(DType::F32);
        let i = b.push(Inst::Index, DType::I64);
        let load = Inst::Load {
            input,
            index: i,
            guard: None,
        };
        let x = b.push(load, DType::F32);
        b.store(x);
        let k = b.finish();
        k.validate().unwrap();
        match nvrtc_check(&k) {
            Ok(ran) => assert_eq!(ran, nvrtc_present()),
            Err(Error::Internal { op, .. }) => assert_eq!(op, "render"),
            Err(e) => panic!("unexpected {e}"),
        }
    }
}
