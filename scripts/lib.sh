# Shared by scripts/test and scripts/demo: install what a fresh machine lacks, and run steps
# with a visible header. Sourced, not run.

# The GPU the wgpu tests and the demo run on when the machine has none: Mesa's software Vulkan
# driver (lavapipe). Installed only when no Vulkan driver is present.
ensure_vulkan() {
    if { compgen -G "/usr/share/vulkan/icd.d/*.json" || compgen -G "/etc/vulkan/icd.d/*.json"; } >/dev/null \
        && ldconfig -p 2>/dev/null | grep -q libvulkan.so.1; then
        return 0
    fi
    echo "==> installing Mesa's software Vulkan driver (mesa-vulkan-drivers)"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null; then sudo="sudo"; else
            echo "error: no Vulkan driver, and not root to install mesa-vulkan-drivers" >&2
            return 1
        fi
    fi
    # One install failed once with a transient dpkg error; retry.
    for attempt in 1 2 3; do
        if $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
            && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mesa-vulkan-drivers libvulkan1 >/dev/null; then
            return 0
        fi
        echo "apt-get failed (attempt $attempt); retrying" >&2
        sleep 3
    done
    echo "error: could not install mesa-vulkan-drivers" >&2
    return 1
}

# The OTLP tests' collector (rotel, from PyPI) embeds Python 3.11: it needs python3.11 with venv
# and libpython3.11. Installed from Debian only when missing.
ensure_python311() {
    if command -v python3.11 >/dev/null && python3.11 -c 'import venv, ensurepip' 2>/dev/null \
        && ldconfig -p 2>/dev/null | grep -q 'libpython3\.11\.so'; then
        return 0
    fi
    echo "==> installing python3.11, python3.11-venv and libpython3.11 (the OTLP collector needs them)"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    for attempt in 1 2 3; do
        if $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
            && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3.11 python3.11-venv libpython3.11 >/dev/null; then
            return 0
        fi
        echo "apt-get failed (attempt $attempt); retrying" >&2
        sleep 3
    done
    echo "error: could not install python3.11 for the OTLP collector" >&2
    return 1
}

# The live dashboard's tests drive `gpuspan top` in a terminal: tmux gives them one to send keys
# to and read back (capture-pane). Installed from Debian only when missing.
# A Debian package a step needs, installed when its command is missing (retried: apt-get has
# failed once with a transient dpkg error).
ensure_package() {
    local command="$1" package="$2" why="$3"
    if command -v "$command" >/dev/null; then
        return 0
    fi
    echo "==> installing $package ($why)"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    for attempt in 1 2 3; do
        if $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
            && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null; then
            return 0
        fi
        echo "apt-get failed (attempt $attempt); retrying" >&2
        sleep 3
    done
    echo "error: could not install $package" >&2
    return 1
}

ensure_tmux() {
    ensure_package tmux tmux "the live dashboard's tests run gpuspan top inside it"
}

ensure_xvfb() {
    ensure_package Xvfb xvfb "wgpu_instrumented.rs presents to a window surface on a virtual X display"
}

ensure_valgrind() {
    ensure_package valgrind valgrind "scripts/count-check counts the hot path's instructions"
    ensure_package bc bc "the count scripts' arithmetic"
}

# wgpu's Vulkan loader warns when XDG_RUNTIME_DIR is unset; give it a private one.
ensure_runtime_dir() {
    if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "${XDG_RUNTIME_DIR}" ]; then
        XDG_RUNTIME_DIR="$(mktemp -d)"
        chmod 700 "$XDG_RUNTIME_DIR"
        export XDG_RUNTIME_DIR
    fi
}

# Free space where cargo builds, said up front: a full disk otherwise shows up minutes later as
# an LLVM "IO failure on output stream" in whichever crate happened to be compiling.
report_disk() {
    local dir="${CARGO_TARGET_DIR:-target}" free_kib
    mkdir -p "$dir"
    free_kib="$(df -Pk "$dir" | awk 'NR==2 {print $4}')"
    echo "disk: $((free_kib / 1024 / 1024)) GiB free for $dir; the suite needs about 8 GiB from a cold start"
    if [ "$free_kib" -lt $((8 * 1024 * 1024)) ]; then
        echo "disk: warning: less than 8 GiB free; the build may run out of space" >&2
    fi
}

step() {
    local name="$1"
    shift
    echo
    echo "==> $name"
    echo "    \$ $*"
    local start=$SECONDS
    "$@"
    echo "    ($name: $((SECONDS - start)) s)"
}

# --- The GPU machine's halves (scripts/gpu, gpu-bench, gpu-monitor) -------------------------

# Copies the executables cargo built, as listed by `--message-format=json` on stdin, into DEST:
# `copy_executables DEST TARGET[=NAME]...` (NAME: the file's name in DEST, default TARGET).
copy_executables() {
    local dest="$1"
    shift
    DEST="$dest" python3 -c '
import json, os, shutil, sys
names = dict(a.split("=", 1) if "=" in a else (a, a) for a in sys.argv[1:])
found = set()
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in names:
        shutil.copy(m["executable"], os.path.join(os.environ["DEST"], names[m["target"]["name"]]))
        found.add(m["target"]["name"])
missing = sorted(set(names) - found)
if missing:
    sys.exit("cargo built no executable for: " + " ".join(missing))
' "$@"
}

# The one place the GPU machine's CUDA libraries (libcupti, libcublas, libnvrtc) are found.
cuda_library_path() {
    export LD_LIBRARY_PATH="/usr/local/cuda/targets/x86_64-linux/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
}

# `gpu_step NAME COMMAND...`: runs one step of a GPU script with a time limit
# (STEP_TIMEOUT, default 300 s), its output appended to STEP_LOG; a failure is said in the log
# and sets STEP_FAILED=1, which the script returns as its exit status (the next steps still run).
STEP_FAILED=0
gpu_step() {
    local name="$1"
    shift
    echo "=== $name: $*" | tee -a "$STEP_LOG"
    timeout "${STEP_TIMEOUT:-300}" "$@" 2>&1 | tee -a "$STEP_LOG"
    local status="${PIPESTATUS[0]}"
    if [ "$status" -ne 0 ]; then
        echo "=== FAILED ($status): $name" | tee -a "$STEP_LOG"
        STEP_FAILED=1
    fi
}
