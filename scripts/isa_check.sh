#!/usr/bin/env bash
# Compiles the CPU code written for one instruction set under the others. The build is native
# (-march=native), so code behind __AVX512F__ is compiled only on AVX-512 machines and code
# behind __AVX2__ (or the scalar fallback) only where AVX-512 is absent: a session on one kind
# of CPU could break another kind's path without a compiler ever seeing it. This stage compiles
# every translation unit that reads such code, as the build compiles it (its command from
# BUILD/compile_commands.json) but for each of
#   x86-64-v2   no AVX: the scalar fallbacks
#   x86-64-v3   AVX2, FMA, F16C: the AVX2 paths (AMD Zen 3 and such)
#   x86-64-v4   AVX-512 F/BW/DQ/VL with AVX512_BF16: the AVX-512 paths (AMD Zen 4/5, Intel
#               Cooper Lake and later)
# and fails when one does not compile. Nothing is run (this CPU may lack the instructions); the
# tests on each kind of CPU run the path it has. An instruction set that defines the same of the
# files' macros as -march=native is left out: the build itself compiled that code.
#
#   ./scripts/isa_check.sh [BUILD_DIR]    default build/, configured and built by setup.sh
#
# Environment: JOBS (default: all cores).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${1:-$root/build}"
jobs="${JOBS:-$(nproc)}"
commands="$build_dir/compile_commands.json"
[ -f "$commands" ] || {
  echo "isa_check: $commands is missing: build first (./scripts/setup.sh build)" >&2
  exit 2
}
isas=("x86-64-v2" "x86-64-v3" "x86-64-v4 -mavx512bf16")

say() { printf '\n== [%4ds] isa: %s\n' "$SECONDS" "$*"; }

# The project's files that choose code by instruction set (they test one of its macros: one
# pattern, also used below to list the macros they test), and one pattern that finds any of them
# in a dependency file.
isa_macro='__(AVX[A-Z0-9_]*|F16C|FMA|SSE[0-9_]*)__'
mapfile -t isa_files < <(cd "$root" && grep -rlE "$isa_macro" core/src tests bench app ui 2> /dev/null | sort)
[ ${#isa_files[@]} -gt 0 ] || {
  echo "isa_check: no source chooses code by instruction set; nothing to check" >&2
  exit 0
}
alternatives="$(IFS='|'; echo "${isa_files[*]}")"

# The instruction-set macros those files test, and which of them a -march defines.
mapfile -t isa_macros < <(cd "$root" && grep -ohE "$isa_macro" "${isa_files[@]}" | sort -u)
macros_defined_by() {
  local defined
  # shellcheck disable=SC2086 # the -march value may carry a second flag (-mavx512bf16)
  defined="$(c++ -march=$1 -dM -E -x c++ /dev/null)"
  local macro
  for macro in "${isa_macros[@]}"; do
    grep -qE "^#define $macro( |$)" <<< "$defined" && printf '%s ' "$macro"
  done
  echo
}
native_macros="$(macros_defined_by native)"
checked=()
for isa in "${isas[@]}"; do
  if [ "$(macros_defined_by "$isa")" = "$native_macros" ]; then
    say "-march=$isa defines what -march=native does here (${native_macros:-none of them}): the build compiled that code"
  else
    checked+=("$isa")
  fi
done
isas=("${checked[@]}")
reads_isa_code="(^|[ /])(${alternatives//./\\.})( |$)"

# compile_commands.json as CMake writes it: one "directory", "command", "file" line per entry.
# A translation unit is checked when its dependency file (OBJECT.d, written by the build) names
# one of those files; a source built into several targets is checked once. The names are matched
# as the tail of a path: with ccache's base_dir (scripts/lib/common.sh) the dependency files hold
# paths relative to the object's folder, without it absolute ones.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
declare -A seen=()
units=0
directory=""
command=""
while IFS= read -r line; do
  case "$line" in
    *'"directory": "'*) directory="${line#*\"directory\": \"}" directory="${directory%\",}" ;;
    *'"command": "'*) command="${line#*\"command\": \"}" command="${command%\",}" ;;
    *'"file": "'*)
      file="${line#*\"file\": \"}"
      file="${file%\"*}"
      [[ "$file" == *.cpp ]] || continue
      [ -z "${seen[$file]:-}" ] || continue
      [[ "$command" =~ \ -o\ ([^ ]+)\  ]] || continue
      depfile="$directory/${BASH_REMATCH[1]}.d"
      grep -qsE "$reads_isa_code" "$depfile" || continue  # -s: an object without a dependency file is left out
      seen[$file]=1
      # JSON's escapes back to the shell's command line.
      command="${command//\\\"/\"}"
      command="${command//\\\\/\\}"
      units=$((units + 1))
      for i in "${!isas[@]}"; do
        out="$work/$i-$units.o"
        # A build configured with -DTRAINBENCH_NATIVE=OFF has no -march: the flag is added. Our
        # -o comes after the build's: the last one wins, so the build's objects stay as they are.
        case "$command" in
          *-march=native*) isa_command="${command/-march=native/-march=${isas[$i]}}" ;;
          *) isa_command="$command -march=${isas[$i]}" ;;
        esac
        printf '%s\0' "cd '$directory' && $isa_command -o '$out' > '$out.log' 2>&1 || { echo 'FAILED -march=${isas[$i]}: $file'; cat '$out.log'; }" >> "$work/jobs"
      done
      ;;
  esac
done < "$commands"

if [ $units = 0 ]; then
  echo "isa_check: no translation unit in $build_dir reads the ${#isa_files[@]} files that choose code by instruction set: its dependency files (*.o.d) are missing; build first (./scripts/setup.sh build)" >&2
  exit 1
fi
say "${#isa_files[@]} files choose code by instruction set; $units translation units read them; compiling each for ${#isas[@]} instruction sets with $jobs jobs"
xargs -0 -P "$jobs" -I{} bash -c '{}' < "$work/jobs" > "$work/failures" 2>&1 || true
if [ -s "$work/failures" ]; then
  cat "$work/failures"
  say "failed: the code for another instruction set does not compile"
  exit 1
fi
say "every translation unit compiled for ${isas[*]}"
