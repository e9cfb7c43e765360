//! NVTX ranges for Nsight Systems and Nsight Compute: while a scope runs on a thread, a range
//! named after its site is pushed in gpuspan's own domain (`gpuspan`), so the tools can show and
//! filter by gpuspan's scopes.
//!
//! No NVTX library is loaded (CUDA 13 no longer ships `libnvToolsExt`): this is NVTX3's own
//! injection protocol, the one its headers compile into every program that uses them. On the
//! first range, if a tool set `NVTX_INJECTION64_PATH` (the Nsight tools do), that library is
//! loaded and its `InitializeInjectionNvtx2` is handed [`get_export_table`]; the tool writes its
//! functions into the slots of our module tables. Without the variable a range costs one load.
//! A library that cannot be loaded, lacks the entry point, refuses, or leaves out a function
//! gpuspan needs is said once in the summary's notes, and NVTX stays off.

use crate::site::Site;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CString, OsStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Where a tool writes one function pointer (`NvtxFunctionPointer`).
type Slot = AtomicPtr<c_void>;
type GetExportTable = unsafe extern "C" fn(u32) -> *const c_void;
type InitializeInjection = unsafe extern "C" fn(GetExportTable) -> c_int;
type DomainCreateA = unsafe extern "C" fn(*const c_char) -> *mut c_void;
type DomainRegisterStringA = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;
type DomainRangePushEx = unsafe extern "C" fn(*mut c_void, *const EventAttributes) -> c_int;
type DomainRangePop = unsafe extern "C" fn(*mut c_void) -> c_int;

/// `NVTX_CBID_*_SIZE` by `NvtxCallbackModule` (INVALID, CORE, CUDA, OPENCL, CUDART, CORE2, SYNC):
/// a tool may fill every module it knows, so each gets slots, though gpuspan reads only CORE2's.
const MODULE_SIZES: [usize; 7] = [0, 16, 9, 15, 7, 16, 7];
const MODULE_CORE2: usize = 5;
/// The largest module size plus the null entry that ends each table.
const TABLE_LEN: usize = 17;
/// `NVTX_CBID_CORE2_*`: the functions gpuspan calls.
const RANGE_PUSH_EX: usize = 4;
const RANGE_POP: usize = 5;
const REGISTER_STRING_A: usize = 10;
const DOMAIN_CREATE_A: usize = 12;
/// `NVTX_ETID_*`.
const ETID_CALLBACKS: u32 = 1;
const ETID_VERSIONINFO: u32 = 3;
/// The NVTX version whose protocol this is (`NVTX_VERSION`).
const NVTX_VERSION: u16 = 3;
/// `NVTX_MESSAGE_TYPE_ASCII`, `NVTX_MESSAGE_TYPE_REGISTERED`.
const MESSAGE_ASCII: i32 = 1;
const MESSAGE_REGISTERED: i32 = 3;

/// `nvtxEventAttributes_v2`, with the message union as the pointer both of its used members are.
#[repr(C)]
#[derive(Debug)]
struct EventAttributes {
    version: u16,
    size: u16,
    category: u32,
    color_type: i32,
    color: u32,
    payload_type: i32,
    reserved0: i32,
    payload: u64,
    message_type: i32,
    message: *const c_void,
}
const _: () = assert!(size_of::<EventAttributes>() == 48);

/// `NvtxExportTableCallbacks`.
#[repr(C)]
struct Callbacks {
    struct_size: usize,
    get_module_function_table: unsafe extern "C" fn(c_int, *mut *const *const Slot, *mut u32) -> c_int,
}

/// `NvtxExportTableVersionInfo`.
#[repr(C)]
struct VersionInfo {
    struct_size: usize,
    version: u32,
    reserved0: u32,
    set_injection_nvtx_version: unsafe extern "C" fn(u32),
}

// constant data: the tables NVTX's loader reads, never written.
static CALLBACKS: Callbacks = Callbacks { struct_size: size_of::<Callbacks>(), get_module_function_table };
// constant data, as `CALLBACKS`.
static VERSION_INFO: VersionInfo = VersionInfo {
    struct_size: size_of::<VersionInfo>(),
    version: NVTX_VERSION as u32,
    reserved0: 0,
    set_injection_nvtx_version,
};

/// The slots a tool fills, and per module the table of pointers to them it is given
/// (`NvtxFunctionTable`: entry 0 and the entry after the last are null, as in NVTX's own).
struct Tables {
    slots: [[Slot; TABLE_LEN]; 7],
    pointers: [[*const Slot; TABLE_LEN]; 7],
}

// SAFETY: the pointers point into the same leaked `Tables`, whose slots are atomics.
unsafe impl Send for Tables {}
unsafe impl Sync for Tables {}

impl Tables {
    /// Leaked: a tool may keep the table pointers for the life of the process.
    fn leak() -> &'static Tables {
        let t: &'static mut Tables = Box::leak(Box::new(Tables {
            slots: std::array::from_fn(|_| std::array::from_fn(|_| AtomicPtr::new(null_mut()))),
            pointers: [[std::ptr::null(); TABLE_LEN]; 7],
        }));
        for (module, &size) in MODULE_SIZES.iter().enumerate() {
            for id in 1..size {
                t.pointers[module][id] = &t.slots[module][id];
            }
        }
        t
    }

    fn core2(&self, id: usize) -> *mut c_void {
        self.slots[MODULE_CORE2][id].load(Ordering::Acquire)
    }
}

/// What the process's NVTX injection holds.
struct Injection {
    /// The tables the tool being initialised (or last initialised) is handed.
    current: AtomicPtr<Tables>,
    /// One initialisation at a time: `current` is what the callbacks read.
    attaching: Mutex<()>,
    /// Decided on the first range: `None` when no tool is attached (or attaching failed).
    tool: OnceLock<Option<Nvtx>>,
}

// process-wide because NVTX's injection protocol is: the tool is loaded once into the process
// and calls back through plain function pointers that carry no handle.
static INJECTION: Injection =
    Injection { current: AtomicPtr::new(null_mut()), attaching: Mutex::new(()), tool: OnceLock::new() };

/// `nvtxGetExportTable`: what a tool asks for first.
unsafe extern "C" fn get_export_table(id: u32) -> *const c_void {
    match id {
        ETID_CALLBACKS => (&raw const CALLBACKS).cast(),
        ETID_VERSIONINFO => (&raw const VERSION_INFO).cast(),
        _ => std::ptr::null(),
    }
}

/// `nvtxEtiGetModuleFunctionTable`: the slots of one module and how many there are.
unsafe extern "C" fn get_module_function_table(
    module: c_int,
    out_table: *mut *const *const Slot,
    out_size: *mut u32,
) -> c_int {
    let tables = INJECTION.current.load(Ordering::Acquire);
    let Some(module) = usize::try_from(module).ok().filter(|m| (1..MODULE_SIZES.len()).contains(m)) else {
        return 0;
    };
    if tables.is_null() {
        return 0;
    }
    // SAFETY: `tables` is leaked, never freed; the out-pointers are the caller's, null or valid.
    unsafe {
        if !out_size.is_null() {
            *out_size = MODULE_SIZES[module] as u32;
        }
        if !out_table.is_null() {
            *out_table = (*tables).pointers[module].as_ptr();
        }
    }
    1
}

/// Reserved by NVTX for working around broken tools; ignored, as NVTX's own does.
unsafe extern "C" fn set_injection_nvtx_version(_version: u32) {}

/// gpuspan's domain in an attached tool, with the functions that tool provided.
#[derive(Debug)]
struct Nvtx {
    domain: *mut c_void,
    register: DomainRegisterStringA,
    push: DomainRangePushEx,
    pop: DomainRangePop,
}

// SAFETY: NVTX functions may be called from any thread; the domain is a process-wide handle.
unsafe impl Send for Nvtx {}
unsafe impl Sync for Nvtx {}

thread_local! {
    /// Each site's name, and its registered handle (null: the tool gave none, send the text),
    /// keyed by the site's address.
    static NAMES: RefCell<HashMap<usize, (CString, *mut c_void)>> = RefCell::new(HashMap::new());
}

/// Pushes the site's range on this thread's stack when a tool is attached; says whether it did,
/// so that the caller pops exactly what it pushed.
#[inline]
pub(crate) fn push(site: &'static Site) -> bool {
    match INJECTION.tool.get_or_init(start) {
        Some(nvtx) => nvtx.push(site),
        None => false,
    }
}

/// Pops the range [`push`] pushed on this thread.
#[inline]
pub(crate) fn pop() {
    if let Some(Some(nvtx)) = INJECTION.tool.get() {
        // SAFETY: the function the tool gave for this domain.
        unsafe { (nvtx.pop)(nvtx.domain) };
    }
}

/// Attaches the tool named by `NVTX_INJECTION64_PATH`, if any.
#[cfg(not(test))]
#[cold]
fn start() -> Option<Nvtx> {
    attach_path(std::env::var_os("NVTX_INJECTION64_PATH"))
}

/// Attaches the tool at `path`; a failure is said once, in the summary's notes.
fn attach_path(path: Option<std::ffi::OsString>) -> Option<Nvtx> {
    let path = path.filter(|p| !p.is_empty())?;
    load(&path).map_err(crate::diagnostics::note_once).ok()
}

/// Unit tests attach the fake tool of `tests.rs` instead of reading the environment.
#[cfg(test)]
fn start() -> Option<Nvtx> {
    attach(tests::init_tool::<true>).ok()
}

/// Loads an injection library and attaches it.
fn load(path: &OsStr) -> Result<Nvtx, String> {
    let shown = path.to_string_lossy();
    // SAFETY: the library is the profiler the user ran the program under; its constructors are
    // what that tool expects to run in the process.
    let library = unsafe { libloading::Library::new(path) }
        .map_err(|e| format!("NVTX ranges off: cannot load the injection library {shown}: {e}"))?;
    // SAFETY: `InitializeInjectionNvtx2` has this signature in every NVTX tool.
    let init = unsafe { library.get::<InitializeInjection>(b"InitializeInjectionNvtx2\0") }
        .map(|f| *f)
        .map_err(|e| format!("NVTX ranges off: {shown} is not an NVTX tool: {e}"))?;
    let nvtx = attach(init).map_err(|e| format!("NVTX ranges off: {shown} {e}"))?;
    // The tool now holds our tables and may run threads: it stays loaded for the process's life.
    std::mem::forget(library);
    Ok(nvtx)
}

/// Runs a tool's initialisation against fresh tables and creates gpuspan's domain in it.
fn attach(init: InitializeInjection) -> Result<Nvtx, String> {
    let _one = INJECTION.attaching.lock().unwrap_or_else(PoisonError::into_inner);
    let tables = Tables::leak();
    INJECTION.current.store(std::ptr::from_ref(tables).cast_mut(), Ordering::Release);
    // SAFETY: `get_export_table` follows NVTX's export-table protocol.
    if unsafe { init(get_export_table) } == 0 {
        return Err("refused to initialise (InitializeInjectionNvtx2 returned 0)".into());
    }
    let missing = |name| format!("did not provide {name}");
    let (create, register, push, pop) = (
        tables.core2(DOMAIN_CREATE_A),
        tables.core2(REGISTER_STRING_A),
        tables.core2(RANGE_PUSH_EX),
        tables.core2(RANGE_POP),
    );
    for (p, name) in [
        (create, "nvtxDomainCreateA"),
        (register, "nvtxDomainRegisterStringA"),
        (push, "nvtxDomainRangePushEx"),
        (pop, "nvtxDomainRangePop"),
    ] {
        if p.is_null() {
            return Err(missing(name));
        }
    }
    // SAFETY: non-null slots hold the tool's implementations of these CORE2 functions.
    unsafe {
        let create = std::mem::transmute::<*mut c_void, DomainCreateA>(create);
        let domain = create(c"gpuspan".as_ptr());
        Ok(Nvtx {
            domain,
            register: std::mem::transmute::<*mut c_void, DomainRegisterStringA>(register),
            push: std::mem::transmute::<*mut c_void, DomainRangePushEx>(push),
            pop: std::mem::transmute::<*mut c_void, DomainRangePop>(pop),
        })
    }
}

impl Nvtx {
    /// Pushes `site`'s range, registering its name on this thread's first use of it.
    fn push(&self, site: &'static Site) -> bool {
        let pushed = NAMES.try_with(|names| {
            let mut names = names.borrow_mut();
            let (text, handle) = names.entry(std::ptr::from_ref(site) as usize).or_insert_with(|| {
                let text = CString::new(site.desc.name.replace('\0', " ")).unwrap_or_default();
                // SAFETY: the tool's function, our domain, a NUL-terminated string.
                let handle = unsafe { (self.register)(self.domain, text.as_ptr()) };
                (text, handle)
            });
            let (message_type, message) = if handle.is_null() {
                (MESSAGE_ASCII, text.as_ptr().cast())
            } else {
                (MESSAGE_REGISTERED, handle.cast_const())
            };
            let attributes = EventAttributes {
                version: NVTX_VERSION,
                size: size_of::<EventAttributes>() as u16,
                category: 0,
                color_type: 0,
                color: 0,
                payload_type: 0,
                reserved0: 0,
                payload: 0,
                message_type,
                message,
            };
            // SAFETY: the tool's function; the attributes (and the text) outlive the call.
            unsafe { (self.push)(self.domain, &attributes) };
        });
        pushed.is_ok()
    }
}

/// Whether a scope pushed its site's range on the current thread ([`push`]), for its pop.
#[derive(Debug, Default)]
pub(super) struct Range(bool);

impl Range {
    #[inline(always)]
    pub(super) fn push(&mut self, site: &'static Site) {
        self.0 = push(site);
    }

    #[inline(always)]
    pub(super) fn pop(&mut self) {
        if std::mem::take(&mut self.0) {
            pop();
        }
    }
}

#[cfg(test)]
mod tests;
