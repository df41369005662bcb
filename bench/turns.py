"""Training runs timed in turns: several trainbench-cli processes live at once, only one running.

On a host whose speed changes for seconds at a time (the 2-vCPU guests we measure on swing by a
third), runs timed one after the other can fall in phases their rivals missed. Here each run is
its own process, held with SIGSTOP except during its turns; in turn it runs a number of updates,
read live from its event stream (`--events-out -`), and is stopped again. A cycle gives every run
one turn, so the turns of one cycle lie within a second or two of each other. The first update of
each turn is not counted: it may have been stopped half-way, and it starts with the other runs'
data in the caches. The order of the turns rotates from cycle to cycle. bench/precision_turns.py
and bench/compare_clis.py time their runs this way."""
import json
import os
import signal
import statistics
import subprocess
import sys


class Run:
    """One trainbench-cli training run (`flags` after `train`), stopped except during its turns."""

    def __init__(self, label, cli, flags, workdir):
        self.label = label
        self.stderr = open(os.path.join(workdir, f"{label.replace(' ', '_')}.log"), "w+")
        self.command = [cli, "train", *flags, "--epochs", "1000", "--max-steps", "1000000", "--events-out", "-",
                        "--stop-on-input"]
        self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.stderr, text=True)
        self.process.send_signal(signal.SIGSTOP)

    def take_turn(self, updates):
        """Runs until `updates` more updates have ended; their update_ms, in order."""
        self.process.send_signal(signal.SIGCONT)
        times = []
        while len(times) < updates:
            line = self.process.stdout.readline()
            if not line:
                self.fail("ended before it was stopped")
            event = json.loads(line)
            if event.get("event") == "update":
                times.append(float(event["update_ms"]))
            elif event.get("event") == "end":
                self.fail(f"ended: {event.get('reason')}: {event.get('message')}")
        self.process.send_signal(signal.SIGSTOP)
        return times

    def stop(self):
        self.process.send_signal(signal.SIGCONT)
        self.process.communicate("stop\n")
        self.stderr.close()

    def fail(self, why):
        self.stderr.seek(0)
        last = self.stderr.read().strip().splitlines()[-1:]
        sys.exit(f"{' '.join(self.command)}: {why} {last}")


def time_in_turns(runs, turn, cycles, warmup_cycles, workdir):
    """Starts every run of `runs` ({label: (cli, flags)}), then takes warmup_cycles + cycles cycles
    of `turn` updates per run; {label: [[counted update_ms of its turn] per counted cycle]}."""
    started = [Run(label, cli, flags, workdir) for label, (cli, flags) in runs.items()]
    turns = {label: [] for label in runs}
    try:
        for cycle in range(warmup_cycles + cycles):
            # The order rotates from cycle to cycle: no run always follows the same one.
            for run in started[cycle % len(started):] + started[:cycle % len(started)]:
                times = run.take_turn(turn)
                if cycle >= warmup_cycles:
                    turns[run.label].append(times[1:])
    finally:
        for run in started:
            if run.process.poll() is None:
                run.stop()
    return turns


def median_of(turns):
    """The median of every counted update of a run's turns."""
    return statistics.median(t for turn in turns for t in turn)


def ratios_by_cycle(turns, baseline_turns):
    """Each cycle's median of `turns` over its median of `baseline_turns`, sorted."""
    return sorted(statistics.median(a) / statistics.median(b) for a, b in zip(turns, baseline_turns))
