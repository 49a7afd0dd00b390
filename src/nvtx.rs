//! NVTX ranges around evaluation, planning, kernels, library calls and transfers, so that
//! Nsight Systems (or any NVTX tool) shows lazyfuse's steps by name on the host timeline.
//!
//! This is the client side of NVTX v3's injection protocol, written here so that no NVTX
//! header or build-time binding is needed (NVIDIA's `nvtx3/nvtxDetail/nvtxInit.h`,
//! `nvtxImpl.h` and `nvtxTypes.h` define it): a tool names its library in
//! `NVTX_INJECTION64_PATH`; the client loads it and calls its `InitializeInjectionNvtx2` with
//! the client's export-table getter. Through the callbacks table the tool asks, per callback
//! module, for an array of pointers to the client's function-pointer slots and writes its own
//! functions into the slots it implements. A call goes to what its slot holds, and nowhere
//! when the slot is null. Every function of the protocol has `NVTX_API`'s calling convention
//! (`nvToolsExt.h`: `__stdcall` on Windows, C elsewhere), Rust's `extern "system"`.
//!
//! Cost without a tool: the first range reads the variable once; when it is unset (or the
//! tool fails to load) a relaxed atomic flag says "off" for good and every later range is
//! that one load.

use crate::config::debug_log;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering::Relaxed};
use std::sync::OnceLock;

/// The variable naming the tool's library (`nvtxInit.h`: `NVTX_INJECTION32_PATH` in a
/// 32-bit process).
#[cfg(target_pointer_width = "64")]
const INJECTION_PATH: &str = "NVTX_INJECTION64_PATH";
#[cfg(not(target_pointer_width = "64"))]
const INJECTION_PATH: &str = "NVTX_INJECTION32_PATH";

/// `NvtxExportTableID` (`nvtxTypes.h`).
const ETID_CALLBACKS: u32 = 1;
const ETID_VERSIONINFO: u32 = 3;
/// `NVTX_VERSION` (`nvToolsExt.h`), reported in the version-info table.
const NVTX_VERSION: u32 = 3;

/// `NvtxCallbackIdCore` (`nvtxTypes.h`): the slots of the CORE module this client calls.
const CORE_MARK_A: usize = 2;
const CORE_RANGE_PUSH_A: usize = 9;
const CORE_RANGE_POP: usize = 11;

/// The callback modules (`NvtxCallbackModule`) and their id counts (`NVTX_CBID_*_SIZE`, the
/// invalid id 0 included): CORE, CUDA, OPENCL, CUDART, CORE2, SYNC. Every module gets slots
/// a tool may fill, as the header's own client gives them, so that a tool asking for any
/// module it knows succeeds; only CORE's push, pop and mark slots are ever called.
const MODULES: [(c_int, usize); 6] = [(1, 16), (2, 9), (3, 15), (4, 7), (5, 16), (6, 7)];
/// Slots of all modules together.
const SLOT_COUNT: usize = module_offsets().0;
/// Table entries of all modules together: each module's table has one more entry than it
/// has ids, a null terminator (`nvtxImpl.h`: "to ensure a crash instead of silent
/// corruption if a tool reads off the end").
const TABLE_LEN: usize = SLOT_COUNT + MODULES.len();

/// (total slots, first slot of each module); a module's table starts at its first slot plus
/// its index (one terminator per module before it).
const fn module_offsets() -> (usize, [usize; MODULES.len()]) {
    let mut first = [0; MODULES.len()];
    let mut total = 0;
    let mut m = 0;
    while m < MODULES.len() {
        first[m] = total;
        total += MODULES[m].1;
        m += 1;
    }
    (total, first)
}

/// One function-pointer slot a tool may fill (a C `void (*)(void)`, null when not attached).
/// A tool writes it through the table during its initialization (and may again later); the
/// client reads it at each call.
#[repr(transparent)]
struct Slot(AtomicPtr<c_void>);

/// The tables handed to the tool, all modules' in a row: for each module, entry 0 (the
/// invalid id) null, entry `id` the address of slot `id`, then a null terminator.
struct Tables([*const Slot; TABLE_LEN]);

// SAFETY: the addresses point at `NVTX.slots`, atomics in a static, and the array itself is
// never written after its constant initialization.
unsafe impl Sync for Tables {}

const fn tables() -> [*const Slot; TABLE_LEN] {
    let mut t = [ptr::null(); TABLE_LEN];
    let first = module_offsets().1;
    let mut m = 0;
    while m < MODULES.len() {
        let mut id = 1;
        while id < MODULES[m].1 {
            t[first[m] + m + id] = &NVTX.slots[first[m] + id];
            id += 1;
        }
        m += 1;
    }
    t
}

/// `NvtxExportTableCallbacks` (`nvtxTypes.h`).
#[repr(C)]
struct CallbacksTable {
    struct_size: usize,
    get_module_function_table:
        unsafe extern "system" fn(c_int, *mut *const *const Slot, *mut c_uint) -> c_int,
}

/// `NvtxExportTableVersionInfo` (`nvtxTypes.h`).
#[repr(C)]
struct VersionInfoTable {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: extern "system" fn(u32),
}

/// The client's side of NVTX in this process: the slots a tool fills, the tables handed to
/// it (which point at the slots, so they live in one place for good), and the tool itself.
struct Nvtx {
    /// The function pointers a tool writes (push, pop, mark, ...).
    slots: [Slot; SLOT_COUNT],
    /// The module tables, pointing at `slots`.
    tables: Tables,
    callbacks: CallbacksTable,
    version_info: VersionInfoTable,
    /// True once it is known that no tool is attached: every call then returns at once.
    off: AtomicBool,
    /// The attached tool's library (kept loaded for the life of the process), once looked
    /// for.
    tool: OnceLock<Option<libloading::Library>>,
}

/// NVTX in this process: the tool is loaded into the process.
static NVTX: Nvtx = Nvtx {
    slots: [const { Slot(AtomicPtr::new(ptr::null_mut())) }; SLOT_COUNT],
    tables: Tables(tables()),
    callbacks: CallbacksTable {
        struct_size: std::mem::size_of::<CallbacksTable>(),
        get_module_function_table,
    },
    version_info: VersionInfoTable {
        struct_size: std::mem::size_of::<VersionInfoTable>(),
        version: NVTX_VERSION,
        reserved0: 0,
        set_injection_nvtx_version,
    },
    off: AtomicBool::new(false),
    tool: OnceLock::new(),
};

/// `NvtxGetExportTableFunc_t`: the export table of id `id`, null for an unknown id.
extern "system" fn get_export_table(id: u32) -> *const c_void {
    match id {
        ETID_CALLBACKS => ptr::addr_of!(NVTX.callbacks).cast(),
        ETID_VERSIONINFO => ptr::addr_of!(NVTX.version_info).cast(),
        _ => ptr::null(),
    }
}

/// `GetModuleFunctionTable`: the table of `module` and its size (ids, not counting the
/// terminator) through the non-null out-pointers; 0 for an unknown module, as the header's
/// client answers.
unsafe extern "system" fn get_module_function_table(
    module: c_int,
    out_table: *mut *const *const Slot,
    out_size: *mut c_uint,
) -> c_int {
    let Some(m) = MODULES.iter().position(|&(id, _)| id == module) else {
        return 0;
    };
    let start = module_offsets().1[m] + m;
    if !out_size.is_null() {
        // SAFETY: the tool passes a writable `unsigned int` or null (checked).
        unsafe { *out_size = MODULES[m].1 as c_uint };
    }
    if !out_table.is_null() {
        // SAFETY: the tool passes a writable `NvtxFunctionTable` or null (checked); `start`
        // is inside `NVTX.tables`, whose entries from there run to this module's terminator.
        unsafe { *out_table = NVTX.tables.0.as_ptr().add(start) };
    }
    1
}

/// `SetInjectionNvtxVersion`: reserved (the header's client ignores it too).
extern "system" fn set_injection_nvtx_version(_version: u32) {}

/// `NvtxInitializeInjectionNvtxFunc_t`.
type InitFn = unsafe extern "system" fn(extern "system" fn(u32) -> *const c_void) -> c_int;
/// `nvtxRangePushA_impl_fntype`.
type PushFn = unsafe extern "system" fn(*const c_char) -> c_int;
/// `nvtxMarkA_impl_fntype`.
type MarkFn = unsafe extern "system" fn(*const c_char);
/// `nvtxRangePop_impl_fntype`.
type PopFn = unsafe extern "system" fn() -> c_int;

/// Whether a tool is attached (looked for on the first call).
#[inline]
fn attached() -> bool {
    !NVTX.off.load(Relaxed) && attach_once()
}

#[cold]
fn attach_once() -> bool {
    let on = NVTX.tool.get_or_init(load).is_some();
    if !on {
        NVTX.off.store(true, Relaxed);
    }
    on
}

/// Loads and initializes the tool named by the environment; `None` when none is named or
/// it cannot be attached (said at `LAZYFUSE_DEBUG>=1`).
fn load() -> Option<libloading::Library> {
    let path = crate::config::nvtx_injection_path(INJECTION_PATH)?;
    match attach(&path) {
        Ok(lib) => {
            debug_log!(2, "nvtx: ranges go to {}", path.to_string_lossy());
            Some(lib)
        }
        Err(why) => {
            // a failed tool leaves nothing behind (`nvtxInit.h`: all pointers set to no-ops)
            for s in &NVTX.slots {
                s.0.store(ptr::null_mut(), Relaxed);
            }
            debug_log!(
                1,
                "nvtx: no ranges: {INJECTION_PATH}={}: {why}",
                path.to_string_lossy()
            );
            None
        }
    }
}

fn attach(path: &std::ffi::OsStr) -> Result<libloading::Library, String> {
    // SAFETY: loading runs the library's initializers; it is the library the user named as
    // the NVTX tool to load into this process, which is what the variable asks for.
    let lib = unsafe { libloading::Library::new(path) }.map_err(|e| format!("cannot load: {e}"))?;
    // SAFETY: `InitializeInjectionNvtx2` has type `NvtxInitializeInjectionNvtxFunc_t` in
    // every NVTX v3 tool (`nvtxTypes.h`); the copied pointer is used while `lib` is loaded.
    let init: InitFn = *unsafe { lib.get::<InitFn>(c"InitializeInjectionNvtx2") }
        .map_err(|e| format!("no InitializeInjectionNvtx2: {e}"))?;
    // SAFETY: the protocol's entry point, called once with this client's export-table
    // getter, which (like the tables it returns) stays valid for the life of the process.
    if unsafe { init(get_export_table) } == 0 {
        return Err("InitializeInjectionNvtx2 returned 0 (failure)".into());
    }
    Ok(lib)
}

/// The function in CORE slot `id`, if the tool filled it.
#[inline]
fn slot(id: usize) -> Option<*mut c_void> {
    let f = NVTX.slots[id].0.load(Relaxed);
    (!f.is_null()).then_some(f)
}

/// `nvtxRangePushA(name)`; true when the tool took it.
fn push(name: &CStr) -> bool {
    let Some(f) = slot(CORE_RANGE_PUSH_A) else {
        return false;
    };
    // SAFETY: the tool wrote a function of type `nvtxRangePushA_impl_fntype` into the
    // RangePushA slot of the CORE table; `name` is NUL-terminated and outlives the call.
    unsafe { std::mem::transmute::<*mut c_void, PushFn>(f)(name.as_ptr()) };
    true
}

/// `nvtxRangePop()`.
fn pop() {
    if let Some(f) = slot(CORE_RANGE_POP) {
        // SAFETY: the tool wrote a function of type `nvtxRangePop_impl_fntype` into the
        // RangePop slot of the CORE table.
        unsafe { std::mem::transmute::<*mut c_void, PopFn>(f)() };
    }
}

/// `name` as a C string (NUL bytes, which C cannot carry, dropped).
fn c_string(name: String) -> CString {
    CString::new(name).unwrap_or_else(|e| {
        let mut bytes = e.into_vec();
        bytes.retain(|&b| b != 0);
        CString::new(bytes).unwrap_or_default()
    })
}

/// An open range of this thread, closed when dropped or [ended](Range::end); with no tool
/// attached, an inert value. Ranges nest per thread (NVTX push/pop), hence not `Send`.
#[must_use = "the range closes when this value is dropped"]
pub(crate) struct Range {
    open: bool,
    _thread: PhantomData<*const ()>,
}

impl Range {
    const CLOSED: Range = Range {
        open: false,
        _thread: PhantomData,
    };

    /// Closes the range now (dropping it later does nothing more).
    pub(crate) fn end(&mut self) {
        if std::mem::take(&mut self.open) {
            pop();
        }
    }
}

impl Drop for Range {
    fn drop(&mut self) {
        self.end();
    }
}

/// Opens the range `name` on this thread's NVTX stack.
#[inline]
pub(crate) fn range(name: &'static CStr) -> Range {
    if !attached() {
        return Range::CLOSED;
    }
    Range {
        open: push(name),
        _thread: PhantomData,
    }
}

/// Opens a range whose name is made by `name`, called only when a tool is attached.
#[inline]
pub(crate) fn range_with(name: impl FnOnce() -> String) -> Range {
    if !attached() {
        return Range::CLOSED;
    }
    Range {
        open: push(&c_string(name())),
        _thread: PhantomData,
    }
}

/// Marks the instant `name` (`nvtxMarkA`) on this thread.
#[inline]
pub(crate) fn mark(name: &'static CStr) {
    if !attached() {
        return;
    }
    if let Some(f) = slot(CORE_MARK_A) {
        // SAFETY: the tool wrote a function of type `nvtxMarkA_impl_fntype` into the MarkA
        // slot of the CORE table; `name` is a static NUL-terminated string.
        unsafe { std::mem::transmute::<*mut c_void, MarkFn>(f)(name.as_ptr()) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_follow_the_header_layout() {
        // CORE: 16 ids, its table at the start; CUDA's after CORE's 17 entries
        let (mut table, mut size) = (ptr::null(), 0);
        // SAFETY: valid out-pointers.
        assert_eq!(
            unsafe { get_module_function_table(1, &mut table, &mut size) },
            1
        );
        assert_eq!(size, 16);
        assert_eq!(table, NVTX.tables.0.as_ptr());
        assert!(NVTX.tables.0[0].is_null() && NVTX.tables.0[16].is_null());
        assert_eq!(
            NVTX.tables.0[CORE_RANGE_PUSH_A],
            &NVTX.slots[CORE_RANGE_PUSH_A] as *const Slot
        );
        // SAFETY: valid out-pointers.
        assert_eq!(
            unsafe { get_module_function_table(2, &mut table, &mut size) },
            1
        );
        assert_eq!(size, 9);
        // SAFETY: CUDA's table has 10 entries from `table`.
        let cuda = unsafe { std::slice::from_raw_parts(table, 10) };
        assert!(cuda[0].is_null() && cuda[9].is_null());
        assert_eq!(cuda[1], &NVTX.slots[17] as *const Slot);
        // the last module's terminator is the last entry
        assert!(NVTX.tables.0[TABLE_LEN - 1].is_null());
        assert_eq!(NVTX.tables.0.iter().filter(|p| p.is_null()).count(), 12);
        // SAFETY: null out-pointers are allowed.
        assert_eq!(
            unsafe { get_module_function_table(0, ptr::null_mut(), ptr::null_mut()) },
            0
        );
        // SAFETY: as above.
        assert_eq!(
            unsafe { get_module_function_table(7, ptr::null_mut(), ptr::null_mut()) },
            0
        );
        assert!(get_export_table(2).is_null());
        assert_eq!(
            std::mem::size_of::<CallbacksTable>(),
            2 * std::mem::size_of::<usize>()
        );
    }

    #[test]
    fn nul_bytes_are_dropped_from_names() {
        assert_eq!(c_string("a\0b".into()).as_bytes(), b"ab");
    }
}
