# shellcheck shell=bash
# Shared by scripts/setup.sh and scripts/sanitize.sh (sourced, not run): installing the Debian
# packages a script needs, and keeping ccache's objects tied to this CPU and checkout.
# Callers define `say` (their progress line) and `set -euo pipefail`.

# install_missing_packages SCRIPT PACKAGE...: installs those of PACKAGE that are not installed
# (apt-get, as root or through sudo); on a system without dpkg/apt-get it names them and goes on.
install_missing_packages() {
  local script="$1"
  shift
  [ $# -gt 0 ] || return 0
  if ! command -v dpkg-query > /dev/null || ! command -v apt-get > /dev/null; then
    echo "$script: this is not a Debian system (no dpkg/apt-get); install the equivalents of:" >&2
    echo "  $*" >&2
    return 0
  fi
  local missing=() package
  for package in "$@"; do
    if [ "$(dpkg-query -W -f='${db:Status-Status}' "$package" 2> /dev/null)" != "installed" ]; then
      missing+=("$package")
    fi
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "all required Debian packages are installed"
    return 0
  fi
  local as_root=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo > /dev/null || {
      echo "$script: need root to install ${missing[*]}: run as root or install sudo" >&2
      exit 1
    }
    as_root=(sudo)
  fi
  say "installing ${missing[*]}"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get install -y --no-install-recommends "${missing[@]}"
}

# prepare_ccache BUILD_DIR ROOT: -march=native (TRAINBENCH_NATIVE, on by default) compiles for
# this CPU, which ccache does not see in the command line: hash what it expands to, so a cache
# shared between machines (a CI cache) never hands out objects built for another CPU (ccache
# issue #824). Paths under the checkout are hashed relative to it, so a clone in another folder
# (a CI workspace) still hits the cache.
prepare_ccache() {
  local build_dir="$1" root="$2"
  mkdir -p "$build_dir"
  local flags="$build_dir/native-cpu-flags.txt"
  if c++ -march=native -Q --help=target > "$flags" 2> /dev/null; then
    export CCACHE_EXTRAFILES="$flags"
  fi
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
}
