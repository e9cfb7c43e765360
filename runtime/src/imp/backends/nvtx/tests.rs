//! A fake NVTX tool, written against the protocol as a tool sees it: it asks for the export
//! tables, fills CORE2's slots with functions that log what they are called with, and the test
//! checks what gpuspan sent.

use super::*;
use crate::site::{Backend, SiteDesc, SiteKind};
use std::ffi::CStr;

static SITE: Site = Site::new(SiteDesc {
    function: "nvtx_site",
    ..crate::site::site_desc!("nvtx site", SiteKind::Kernel, Backend::Cuda)
});

thread_local! {
    /// What the fake tool's functions saw on this thread, in order: per thread, because tests
    /// run in parallel, and an NVTX range stack is a thread's.
    static LOG: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}
/// The domain handle the fake tool gives out.
const DOMAIN: usize = 0xd0;

fn log(line: String) {
    LOG.with_borrow_mut(|l| l.push(line));
}

/// This thread's log so far, emptied.
fn take_log() -> Vec<String> {
    LOG.take()
}

unsafe extern "C" fn create(name: *const c_char) -> *mut c_void {
    log(format!("create {}", unsafe { CStr::from_ptr(name) }.to_string_lossy()));
    DOMAIN as *mut c_void
}

/// Hands out the string itself, copied and leaked, as its handle.
unsafe extern "C" fn register(domain: *mut c_void, text: *const c_char) -> *mut c_void {
    let text = unsafe { CStr::from_ptr(text) }.to_owned();
    log(format!("register {:#x} {}", domain as usize, text.to_string_lossy()));
    text.into_raw().cast()
}

unsafe extern "C" fn push(domain: *mut c_void, a: *const EventAttributes) -> c_int {
    let a = unsafe { &*a };
    let text = unsafe { CStr::from_ptr(a.message.cast()) }.to_string_lossy();
    log(format!("push {:#x} v{} size {} type {} {text}", domain as usize, a.version, a.size, a.message_type));
    0
}

unsafe extern "C" fn pop(domain: *mut c_void) -> c_int {
    log(format!("pop {:#x}", domain as usize));
    0
}

/// Asks for the tables as Nsight does and fills CORE2's four functions gpuspan uses (or, with
/// `FILL` false, none).
pub(super) unsafe extern "C" fn init_tool<const FILL: bool>(get: GetExportTable) -> c_int {
    unsafe {
        let callbacks = &*get(ETID_CALLBACKS).cast::<Callbacks>();
        let version = &*get(ETID_VERSIONINFO).cast::<VersionInfo>();
        (version.set_injection_nvtx_version)(3);
        log(format!(
            "tables {} {} v{} unknown {}",
            callbacks.struct_size,
            version.struct_size,
            version.version,
            get(2).is_null() && get(99).is_null()
        ));
        let mut sizes = Vec::new();
        for module in 0..8 {
            let (mut table, mut size) = (std::ptr::null(), 0u32);
            let ok = (callbacks.get_module_function_table)(module, &mut table, &mut size);
            sizes.push(if ok == 1 { size.to_string() } else { "-".into() });
            if ok == 1 {
                // A tool writes every slot of a module it knows; entry 0 and the end are null.
                let slots = std::slice::from_raw_parts(table, size as usize + 1);
                log(format!("module {module} ends null {}", slots[0].is_null() && slots[size as usize].is_null()));
                if module as usize == MODULE_CORE2 && FILL {
                    for (id, f) in [
                        (DOMAIN_CREATE_A, create as *mut c_void),
                        (REGISTER_STRING_A, register as *mut c_void),
                        (RANGE_PUSH_EX, push as *mut c_void),
                        (RANGE_POP, pop as *mut c_void),
                    ] {
                        (*slots[id]).store(f, Ordering::Release);
                    }
                }
            }
        }
        log(format!("sizes {}", sizes.join(" ")));
    }
    1
}

unsafe extern "C" fn refusing_tool(_get: GetExportTable) -> c_int {
    0
}

#[test]
fn a_tool_gets_nvtx_tables_and_sees_registered_ranges_in_the_gpuspan_domain() {
    let nvtx = attach(init_tool::<true>).expect("the fake tool filled every function gpuspan needs");
    assert!(nvtx.push(&SITE));
    pop_with(&nvtx);
    assert!(nvtx.push(&SITE));
    pop_with(&nvtx);
    let log = take_log();
    let mine: Vec<&str> = log.iter().map(String::as_str).filter(|l| !l.starts_with("module")).collect();
    assert_eq!(
        mine,
        [
            "tables 16 24 v3 unknown true",
            "sizes - 16 9 15 7 16 7 -",
            "create gpuspan",
            "register 0xd0 nvtx site",
            "push 0xd0 v3 size 48 type 3 nvtx site",
            "pop 0xd0",
            // Registered once per thread; the second push reuses the handle.
            "push 0xd0 v3 size 48 type 3 nvtx site",
            "pop 0xd0",
        ]
    );
    assert_eq!(log.iter().filter(|l| l.ends_with("ends null true")).count(), 6);
}

fn pop_with(nvtx: &Nvtx) {
    // SAFETY: the fake tool's pop.
    unsafe { (nvtx.pop)(nvtx.domain) };
}

#[test]
fn a_tool_that_refuses_or_leaves_out_a_function_leaves_nvtx_off_with_a_reason() {
    let refused = attach(refusing_tool).expect_err("init returned 0");
    assert!(refused.contains("returned 0"), "{refused}");
    let empty = attach(init_tool::<false>).expect_err("no CORE2 function filled");
    assert_eq!(empty, "did not provide nvtxDomainCreateA");
}

#[test]
fn a_missing_or_foreign_injection_library_is_a_note_not_a_panic() {
    let missing = load(OsStr::new("/nonexistent/libgpuspan-no-tool.so")).expect_err("no such file");
    assert!(missing.starts_with("NVTX ranges off: cannot load the injection library /nonexistent/"), "{missing}");
    // Through the variable's path: no tool, and the reason is among the summary's notes.
    assert!(attach_path(None).is_none() && attach_path(Some("".into())).is_none());
    assert!(attach_path(Some("/nonexistent/libgpuspan-no-tool.so".into())).is_none());
    assert!(crate::diagnostics::notes().iter().any(|n| n == &missing), "{:?}", crate::diagnostics::notes());
    // libc loads but has no InitializeInjectionNvtx2.
    let foreign = load(OsStr::new("libc.so.6")).expect_err("libc is no NVTX tool");
    assert!(foreign.contains("libc.so.6 is not an NVTX tool"), "{foreign}");
}

static SCOPED: Site = Site::new(crate::site::site_desc!("scoped", SiteKind::Kernel, Backend::Host));

/// Pending once, then ready: an `.await` that suspends.
struct YieldOnce(bool);

impl std::future::Future for YieldOnce {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if std::mem::replace(&mut self.0, true) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }
}

/// The ranges the scope sent and the body's own lines, without the attaching and registering.
fn ranges() -> Vec<String> {
    take_log()
        .into_iter()
        .filter(|l| {
            !l.starts_with("module")
                && !l.starts_with("tables")
                && !l.starts_with("sizes")
                && !l.starts_with("create")
                && !l.starts_with("register")
        })
        .collect()
}

#[test]
fn a_sync_scope_is_one_range_and_an_async_one_a_range_per_poll() {
    use crate::future::ScopedFuture;
    use crate::scope::Scope;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    assert!(crate::switch::is_on(), "run without GPUSPAN=off: a scope opened while off has no range");
    take_log();
    {
        let _scope = Scope::host(&SCOPED, tracing::Span::none(), None);
        log("body".into());
    }
    let push = "push 0xd0 v3 size 48 type 3 scoped";
    assert_eq!(ranges(), [push, "body", "pop 0xd0"]);

    let mut future = std::pin::pin!(ScopedFuture::new(Scope::host(&SCOPED, tracing::Span::none(), None), async {
        log("poll 1".into());
        YieldOnce(false).await;
        log("poll 2".into());
    }));
    let mut cx = Context::from_waker(Waker::noop());
    assert!(future.as_mut().poll(&mut cx).is_pending());
    let Poll::Ready(((), scope)) = future.as_mut().poll(&mut cx) else { panic!("ready after one yield") };
    drop(scope);
    // Opened and detached at once; then pushed around each poll, popped before it returns.
    assert_eq!(ranges(), [push, "pop 0xd0", push, "poll 1", "pop 0xd0", push, "poll 2", "pop 0xd0"]);
}
