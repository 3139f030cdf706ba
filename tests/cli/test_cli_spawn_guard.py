"""A script that runs corl without an `if __name__ == "__main__":` guard: every worker that
corl starts with "spawn" (its answer checkers) re-runs that script with the parent's argv.
corl refuses to start a second copy of the command there, and says what to fix."""

import subprocess
import sys
import textwrap


def test_the_command_refuses_to_run_again_inside_a_spawned_worker(tmp_path):
    script = tmp_path / "unguarded.py"
    script.write_text(
        textwrap.dedent(
            """
            import multiprocessing
            from corl.cli import app

            try:
                app(["theory", "--help"], standalone_mode=False)  # no guard: re-run by every spawned child
            except SystemExit as err:
                print(f"child refused: {err}", flush=True)
                raise
            if multiprocessing.parent_process() is None:
                worker = multiprocessing.get_context("spawn").Process(target=print, args=("worker ran",))
                worker.start()
                worker.join()
                print(f"worker exit code {worker.exitcode}", flush=True)
            """
        )
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.count("Usage: ") == 1, out  # the command ran once, in the parent
    assert "child refused: corl: the command was started again inside a multiprocessing worker" in out, out
    assert 'if __name__ == "__main__":' in out
    assert "worker ran" not in out and "worker exit code 1" in out, out
