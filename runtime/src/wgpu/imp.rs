//! What only the instrumented build (`enabled`) has of the wgpu backend, whatever the major: the
//! modules below (in `wgpu/`, beside the door they serve) and the items the majors share.

// `wgpu/memory.rs`, ...: the files stay beside `mod.rs`, whose items they name as `crate::wgpu::`.
#[path = "memory.rs"]
pub(crate) mod memory;
#[path = "open.rs"]
mod open;
#[path = "pass_sum.rs"]
pub(crate) mod pass_sum;
#[path = "scope.rs"]
pub(crate) mod scope;

/// Each major's trait that times a pass begun through a guard (`__private::PassReceiver`),
/// unnamed: `__private::passes` brings them into a timed body's scope.
pub(crate) mod pass_traits {
    macro_rules! reexport_pass_traits {
        ($($variant:ident($module:ident)),* $(,)?) => {
            $(pub use crate::wgpu::$module::PassThroughGuard as _;)*
        };
    }
    with_majors!(reexport_pass_traits);
}

/// What gpuspan keeps of a registered device's adapter, whatever its major: the device
/// monitor matches NVML devices by it.
#[derive(Debug, Clone)]
#[allow(dead_code)] // read by the device monitor, when it is compiled in
pub(crate) struct AdapterFacts {
    pub name: String,
    pub vendor: u32,
    pub device: u32,
    pub device_type: String,
    pub backend: String,
    pub driver: String,
    pub driver_info: String,
    pub pci_bus_id: String,
}
