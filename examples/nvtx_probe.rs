//! A mock NVTX tool for `tests/nvtx.rs`: an injection library that attaches to a process's
//! NVTX client the way Nsight Systems does (`NVTX_INJECTION64_PATH` names it, the client
//! calls its `InitializeInjectionNvtx2`) and appends what it learns and every range push,
//! pop and mark to the file named by `NVTX_PROBE_LOG`, one line each:
//!
//! ```text
//! init version=3 callbacks=16 sizes=0,16,9,15,7,16,7,0 terminated=yes reserved=null
//! ThreadId(1) push lazyfuse.eval
//! ThreadId(1) mark lazyfuse.plan cache miss
//! ThreadId(1) pop
//! ```
//!
//! `NVTX_PROBE_FAIL=1`: it fills the CORE slots and then reports failure (returns 0), which
//! must leave the client with no ranges at all. Built as a `cdylib`
//! (`target/<profile>/examples/libnvtx_probe.so`); not a program to run.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::fs::File;
use std::io::Write;
use std::sync::Mutex;

/// `NvtxExportTableID` and `NvtxCallbackIdCore` values (NVIDIA's `nvtxTypes.h`).
const ETID_CALLBACKS: u32 = 1;
const ETID_RESERVED0: u32 = 2;
const ETID_VERSIONINFO: u32 = 3;
const CB_MODULE_CORE: c_int = 1;
const CORE_MARK_A: usize = 2;
const CORE_RANGE_PUSH_A: usize = 9;
const CORE_RANGE_POP: usize = 11;

/// `NvtxFunctionTable`: an array of pointers to function-pointer slots.
type Table = *const *mut *const c_void;
type GetExportTable = unsafe extern "system" fn(u32) -> *const c_void;

/// `NvtxExportTableCallbacks`.
#[repr(C)]
struct Callbacks {
    struct_size: usize,
    get_module_function_table: unsafe extern "system" fn(c_int, *mut Table, *mut c_uint) -> c_int,
}

/// `NvtxExportTableVersionInfo`.
#[repr(C)]
struct VersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: unsafe extern "system" fn(u32),
}

static LOG: Mutex<Option<File>> = Mutex::new(None);

fn write_line(s: &str) {
    if let Ok(mut log) = LOG.lock() {
        if let Some(f) = log.as_mut() {
            let _ = f.write_all(format!("{s}\n").as_bytes());
        }
    }
}

fn event(what: &str) {
    write_line(&format!("{:?} {what}", std::thread::current().id()));
}

/// `name` as text ("(null)" for a null pointer).
///
/// # Safety
/// `name` is null or a NUL-terminated string.
unsafe fn text(name: *const c_char) -> String {
    if name.is_null() {
        return "(null)".into();
    }
    // SAFETY: non-null and NUL-terminated (the caller's contract).
    unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned()
}

unsafe extern "system" fn range_push_a(name: *const c_char) -> c_int {
    // SAFETY: NVTX passes a NUL-terminated message.
    event(&format!("push {}", unsafe { text(name) }));
    0
}

unsafe extern "system" fn range_pop() -> c_int {
    event("pop");
    0
}

unsafe extern "system" fn mark_a(name: *const c_char) {
    // SAFETY: NVTX passes a NUL-terminated message.
    event(&format!("mark {}", unsafe { text(name) }));
}

/// The tool's entry point: checks the export tables, logs them, and fills the CORE module's
/// RangePushA, RangePop and MarkA slots.
///
/// # Safety
/// Called by an NVTX client with its export-table getter.
#[no_mangle]
pub unsafe extern "system" fn InitializeInjectionNvtx2(get: Option<GetExportTable>) -> c_int {
    let Some(path) = std::env::var_os("NVTX_PROBE_LOG") else {
        return 0;
    };
    let Ok(file) = File::options().create(true).append(true).open(path) else {
        return 0;
    };
    if let Ok(mut log) = LOG.lock() {
        *log = Some(file);
    }
    let Some(get) = get else {
        write_line("init no export-table getter");
        return 0;
    };
    // SAFETY: the getter takes any id and returns null for unknown ones.
    let (version, callbacks, reserved) = unsafe {
        (
            get(ETID_VERSIONINFO),
            get(ETID_CALLBACKS),
            get(ETID_RESERVED0),
        )
    };
    if version.is_null() || callbacks.is_null() {
        write_line("init missing export tables");
        return 0;
    }
    // SAFETY: a non-null ETID_VERSIONINFO table is an `NvtxExportTableVersionInfo`.
    let version = unsafe { &*version.cast::<VersionInfo>() };
    if version.struct_size < std::mem::size_of::<VersionInfo>() {
        write_line(&format!(
            "init version table of {} bytes",
            version.struct_size
        ));
        return 0;
    }
    // SAFETY: the table holds the function (its size was checked).
    unsafe { (version.set_injection_nvtx_version)(version.version) };
    // SAFETY: a non-null ETID_CALLBACKS table is an `NvtxExportTableCallbacks`.
    let callbacks = unsafe { &*callbacks.cast::<Callbacks>() };
    if callbacks.struct_size < std::mem::size_of::<Callbacks>() {
        write_line(&format!(
            "init callbacks table of {} bytes",
            callbacks.struct_size
        ));
        return 0;
    }
    // every module id from the invalid 0 to one past the last (SYNC, 6)
    let mut sizes = Vec::new();
    let mut terminated = true;
    let mut core: Table = std::ptr::null();
    for module in 0..=7 {
        let (mut table, mut size): (Table, c_uint) = (std::ptr::null(), 0);
        // SAFETY: the client's GetModuleFunctionTable with valid out-pointers.
        let ok = unsafe { (callbacks.get_module_function_table)(module, &mut table, &mut size) };
        if ok == 0 || table.is_null() {
            sizes.push(0);
            continue;
        }
        sizes.push(size);
        // SAFETY: a module's table holds `size` slot pointers and a terminator.
        let entries = unsafe { std::slice::from_raw_parts(table, size as usize + 1) };
        terminated &= entries[0].is_null()
            && entries[size as usize].is_null()
            && entries[1..size as usize].iter().all(|p| !p.is_null());
        if module == CB_MODULE_CORE {
            core = table;
        }
    }
    let sizes: Vec<String> = sizes.iter().map(|s| s.to_string()).collect();
    write_line(&format!(
        "init version={} callbacks={} sizes={} terminated={} reserved={}",
        version.version,
        callbacks.struct_size,
        sizes.join(","),
        if terminated { "yes" } else { "no" },
        if reserved.is_null() { "null" } else { "set" },
    ));
    if core.is_null() || sizes.get(1).is_none_or(|s| s != "16") {
        return 0;
    }
    let fill = [
        (CORE_RANGE_PUSH_A, range_push_a as *const c_void),
        (CORE_RANGE_POP, range_pop as *const c_void),
        (CORE_MARK_A, mark_a as *const c_void),
    ];
    for (id, f) in fill {
        // SAFETY: CORE's table has 16 slot pointers, each to a writable slot.
        unsafe { **core.add(id) = f };
    }
    if std::env::var_os("NVTX_PROBE_FAIL").is_some_and(|v| v == "1") {
        write_line("init refused");
        return 0;
    }
    1
}
