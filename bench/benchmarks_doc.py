"""What the bench/ scripts that write docs/BENCHMARKS.md share: the line saying where, when and
at which commit a table was measured, and replacing a generated section between its markers."""
import os
import platform
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measured_line(started):
    """'Measured <started> on **<CPU>** (<n> cores), commit `<short hash>[ + uncommitted changes]`'."""
    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    dirty = subprocess.run(["git", "-C", ROOT, "diff", "--quiet", "HEAD"]).returncode != 0
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    return (f"Measured {started} on **{cpu}** ({os.cpu_count()} cores), commit `{commit}"
            f"{' + uncommitted changes' if dirty else ''}`")


def replace_section(doc, begin, end, lines, heading):
    """Writes `lines` (which start with `begin` and end with `end`) over the section between those
    markers in `doc`, or appends it under `heading` when the markers are not there yet."""
    with open(doc) as f:
        text = f.read()
    block = "\n".join(lines)
    if begin in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + f"\n\n## {heading}\n\n" + block + "\n"
    with open(doc, "w") as f:
        f.write(text)
