//! Which adapter a process runs on, said out loud: the backends asked for (a flag, else
//! `WGPU_BACKEND`, else the ones the kernels are built and measured for: Vulkan, Metal, DX12),
//! the adapter wgpu finds on them, one line naming it, and, when there is none, what to install
//! (docs/runner.md "Device and backend"). [`crate::gpu::Gpu::open`] is the one caller that
//! turns an adapter into a device.

use std::fmt;

use crate::error::KernelError;

/// The backends tried when nothing is asked: the ones the kernels are built and measured for.
/// OpenGL is left out (on a CPU it compiles every shader for minutes and decodes several times
/// slower); `--backend gl` or `WGPU_BACKEND=gl` asks for it.
pub const DEFAULT_BACKENDS: wgpu::Backends = wgpu::Backends::VULKAN
    .union(wgpu::Backends::METAL)
    .union(wgpu::Backends::DX12);

/// The backend names `--backend` and `WGPU_BACKEND` take (wgpu's own spellings).
const NAMES: [(&str, wgpu::Backends); 9] = [
    ("vulkan", wgpu::Backends::VULKAN),
    ("vk", wgpu::Backends::VULKAN),
    ("metal", wgpu::Backends::METAL),
    ("mtl", wgpu::Backends::METAL),
    ("dx12", wgpu::Backends::DX12),
    ("d3d12", wgpu::Backends::DX12),
    ("gl", wgpu::Backends::GL),
    ("gles", wgpu::Backends::GL),
    ("opengl", wgpu::Backends::GL),
];

/// Where a backend choice came from (said in the refusal when it finds no adapter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    Flag,
    Env,
    Default,
}

/// The backends a process may open its device on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backends {
    pub set: wgpu::Backends,
    pub asked: Asked,
}

impl Backends {
    /// `--backend LIST` when given, else `WGPU_BACKEND`, else [`DEFAULT_BACKENDS`]. A name
    /// outside wgpu's list is refused (wgpu itself would skip it with a log line nobody sees).
    pub fn choose(flag: Option<&str>) -> Result<Self, KernelError> {
        let env = std::env::var("WGPU_BACKEND").ok();
        Self::choose_from(flag, env.as_deref())
    }

    /// [`Backends::choose`] with the environment's value given.
    pub fn choose_from(flag: Option<&str>, env: Option<&str>) -> Result<Self, KernelError> {
        let (list, asked, source) = match (flag, env.filter(|e| !e.trim().is_empty())) {
            (Some(f), _) => (f, Asked::Flag, "--backend"),
            (None, Some(e)) => (e, Asked::Env, "WGPU_BACKEND"),
            (None, None) => {
                return Ok(Self {
                    set: DEFAULT_BACKENDS,
                    asked: Asked::Default,
                })
            }
        };
        let mut set = wgpu::Backends::empty();
        for name in list.split(',').map(str::trim) {
            let lower = name.to_ascii_lowercase();
            let Some((_, b)) = NAMES.iter().find(|(n, _)| *n == lower) else {
                return Err(KernelError::UnknownBackend {
                    source_name: source,
                    name: name.to_string(),
                });
            };
            set |= *b;
        }
        Ok(Self { set, asked })
    }

    /// The set as a list of names (`vulkan, metal, dx12`).
    pub fn names(&self) -> String {
        names_of(self.set)
    }

    /// The names of the asked backends this build of wgpu has (`vulkan` on Linux by default).
    pub fn built_names(&self) -> String {
        let built = self.set & wgpu::Instance::enabled_backend_features();
        if built.is_empty() {
            format!("{} (not built into this program)", self.names())
        } else {
            names_of(built)
        }
    }
}

/// `set` as wgpu's first spelling of each backend in [`NAMES`], comma-separated.
fn names_of(set: wgpu::Backends) -> String {
    let mut out: Vec<&str> = Vec::new();
    let mut seen = wgpu::Backends::empty();
    for (name, b) in NAMES {
        if set.contains(b) && !seen.contains(b) {
            seen |= b;
            out.push(name);
        }
    }
    out.join(", ")
}

/// Pipelines compiled on a device and the time it took (`minirun-run --json`: `shaders`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ShaderStats {
    pub pipelines: u64,
    pub seconds: f64,
}

/// What [`crate::gpu::Gpu::open`] opens.
pub struct DeviceRequest {
    pub backends: Backends,
    /// The matvec row mapping (`None`: by the adapter's type).
    pub shape: Option<crate::gpu::MatvecShape>,
    /// The subgroup reduction forced on or off (`None`: where the adapter has it and is a GPU).
    pub subgroups: Option<bool>,
}

/// What a front-end says about the adapter it runs on (`minirun-run --json` carries it as
/// `adapter`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Adapter {
    /// The adapter's name (`llvmpipe (LLVM 15.0.6, 256 bits)` for Mesa lavapipe).
    pub name: String,
    /// `discrete`, `integrated`, `virtual`, `cpu` or `other`.
    pub device_type: &'static str,
    /// `vulkan`, `metal`, `dx12` or `gl`.
    pub backend: &'static str,
    /// The driver and its version where the backend reports them.
    pub driver: String,
}

impl Adapter {
    pub fn from_info(info: &wgpu::AdapterInfo) -> Self {
        let device_type = match info.device_type {
            wgpu::DeviceType::DiscreteGpu => "discrete",
            wgpu::DeviceType::IntegratedGpu => "integrated",
            wgpu::DeviceType::VirtualGpu => "virtual",
            wgpu::DeviceType::Cpu => "cpu",
            wgpu::DeviceType::Other => "other",
        };
        let backend = match info.backend {
            wgpu::Backend::Vulkan => "vulkan",
            wgpu::Backend::Metal => "metal",
            wgpu::Backend::Dx12 => "dx12",
            wgpu::Backend::Gl => "gl",
            wgpu::Backend::BrowserWebGpu => "webgpu",
            wgpu::Backend::Noop => "noop",
        };
        let driver = [info.driver.as_str(), info.driver_info.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        Self {
            name: info.name.clone(),
            device_type,
            backend,
            driver,
        }
    }

    /// The warning a front-end prints after the adapter line, if any: OpenGL is slow.
    pub fn warning(&self) -> Option<String> {
        (self.backend == "gl").then(|| {
            "warning: the OpenGL backend was asked for; the kernels are built and measured for \
             Vulkan, Metal and DX12. On a CPU adapter a first run compiles the shaders at first \
             use for minutes (SmolLM2 35 s, the demo's DeepSeek V4 artifact 166 s on Mesa's \
             llvmpipe) and decodes several times slower than Vulkan (Debian/Ubuntu: install \
             `mesa-vulkan-drivers` and drop --backend gl / WGPU_BACKEND)"
                .to_string()
        })
    }
}

impl fmt::Display for Adapter {
    /// `device: llvmpipe (LLVM 15.0.6, 256 bits), cpu adapter, vulkan backend (llvmpipe Mesa 22.3.6)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "device: {}, {} adapter, {} backend",
            self.name, self.device_type, self.backend
        )?;
        if !self.driver.is_empty() {
            write!(f, " ({})", self.driver)?;
        }
        Ok(())
    }
}

/// The adapter wgpu finds on `backends` (the high-performance one where there are several).
pub fn request(backends: &Backends) -> Result<wgpu::Adapter, KernelError> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    desc.backends = backends.set;
    let instance = wgpu::Instance::new(desc);
    let options = wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        ..Default::default()
    };
    pollster::block_on(instance.request_adapter(&options)).map_err(|_| KernelError::NoAdapter {
        backends: backends.built_names(),
        asked: backends.asked,
        hint: install_hint(),
    })
}

/// The adapter a device would be opened on, without opening one (the demo checks it before it
/// publishes anything).
pub fn probe(backends: &Backends) -> Result<Adapter, KernelError> {
    request(backends).map(|a| Adapter::from_info(&a.get_info()))
}

/// What to install for a usable adapter on this platform.
pub fn install_hint() -> &'static str {
    if cfg!(target_os = "linux") {
        "install a Vulkan driver: on Debian/Ubuntu `apt-get install mesa-vulkan-drivers` (Mesa's \
         lavapipe runs on any CPU; a GPU's own driver is faster), on Fedora `dnf install \
         mesa-vulkan-drivers`; or ask for OpenGL with --backend gl (much slower)"
    } else if cfg!(target_os = "macos") {
        "Metal ships with macOS 10.13 and later; check that the machine has a Metal-capable GPU"
    } else if cfg!(target_os = "windows") {
        "install or update the GPU vendor's driver (DX12 or Vulkan); or ask for OpenGL with \
         --backend gl (much slower)"
    } else {
        "install a Vulkan driver for this platform, or ask for OpenGL with --backend gl"
    }
}

/// On a machine without a session (cron, a container, a systemd service: no absolute
/// `XDG_RUNTIME_DIR`), keeps Mesa's Vulkan device-select layer from probing for a Wayland
/// display, which prints `error: XDG_RUNTIME_DIR is invalid or not set in the environment.`
/// and chooses nothing a compute process uses (wgpu picks the adapter itself). Sets
/// `NODEVICE_SELECT=1` unless the caller set it. Call it first thing in `main`, before any
/// thread exists (it changes the process environment).
pub fn quiet_headless() {
    let session =
        std::env::var_os("XDG_RUNTIME_DIR").is_some_and(|d| std::path::Path::new(&d).is_absolute());
    if !session && std::env::var_os("NODEVICE_SELECT").is_none() {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_over_the_environment_and_the_default_leaves_gl_out() {
        let d = Backends::choose_from(None, None).expect("default");
        assert_eq!(d.set, DEFAULT_BACKENDS);
        assert!(!d.set.contains(wgpu::Backends::GL));
        assert_eq!(d.names(), "vulkan, metal, dx12");
        let e = Backends::choose_from(None, Some("GL")).expect("env");
        assert_eq!((e.set, e.asked), (wgpu::Backends::GL, Asked::Env));
        let f = Backends::choose_from(Some("vulkan, gl"), Some("dx12")).expect("flag");
        assert_eq!(f.set, wgpu::Backends::VULKAN | wgpu::Backends::GL);
        assert_eq!(f.asked, Asked::Flag);
        assert_eq!(
            Backends::choose_from(None, Some(" ")).expect("blank").asked,
            Asked::Default
        );
    }

    #[test]
    fn an_unknown_backend_name_is_refused_with_where_it_came_from() {
        let e = Backends::choose_from(Some("vulkan,opengl2"), None).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("--backend") && s.contains("`opengl2`"), "{s}");
        let e = Backends::choose_from(None, Some("cuda")).unwrap_err();
        assert!(e.to_string().contains("WGPU_BACKEND"), "{e}");
    }

    #[test]
    fn the_adapter_line_names_adapter_type_backend_and_driver_and_gl_is_warned() {
        let info = wgpu::AdapterInfo {
            name: "llvmpipe (LLVM 15.0.6, 256 bits)".into(),
            driver: "llvmpipe".into(),
            driver_info: "Mesa 22.3.6".into(),
            ..wgpu::AdapterInfo::new(wgpu::DeviceType::Cpu, wgpu::Backend::Vulkan)
        };
        let a = Adapter::from_info(&info);
        assert_eq!(
            a.to_string(),
            "device: llvmpipe (LLVM 15.0.6, 256 bits), cpu adapter, vulkan backend (llvmpipe Mesa 22.3.6)"
        );
        assert!(a.warning().is_none());
        let gl = Adapter::from_info(&wgpu::AdapterInfo {
            backend: wgpu::Backend::Gl,
            ..info
        });
        assert!(gl.warning().is_some_and(|w| w.contains("--backend gl")));
    }
}
