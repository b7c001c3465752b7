"""A learner restarts the kernel in the middle of a long data-parallel run: within 10 s
no worker process and nothing of the run in /dev/shm may be left (JupyterLab's restart
sends SIGKILL to the kernel's whole process group)."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest
from browser_support import evaluate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from proc_support import cmdline, descendants, new_shm, running, wait_until  # noqa: E402

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inspects /proc and /dev/shm"),
]

NOTEBOOK = "notebooks/17_under_the_hood.ipynb"
LONG_CELL = """\
import os
from course_lib.parallel.train.data import train_data_parallel
from course_lib.datasets import load_digits
from course_lib.models import MLP
digits = load_digits("train")
print("kernel pid", os.getpid(), flush=True)
train_data_parallel(MLP((64, 64, 10)), digits.x, digits.y, workers=2, batch_size=64, steps=10**6)
"""

OPEN_AND_RUN_JS = """async ([path, code]) => {
  const app = window.jupyterapp;
  const panel = await app.commands.execute('docmanager:open', {path: path, factory: 'Notebook'});
  await panel.context.ready;
  await panel.sessionContext.ready;
  const nb = panel.content;
  nb.activeCellIndex = nb.widgets.length - 1;
  await app.commands.execute('notebook:insert-cell-below');
  nb.activeCell.model.sharedModel.setSource(code);
  app.commands.execute('notebook:run-cell');  // not awaited: the cell runs for minutes
  return panel.id;
}"""

ACTIVE_OUTPUT_JS = """() => {
  const cell = window.jupyterapp.shell.currentWidget.content.activeCell;
  const out = [];
  for (let j = 0; j < cell.model.outputs.length; j++) {
    const o = cell.model.outputs.get(j).toJSON();
    out.push([].concat(o.text || []).join(''));
  }
  return out.join('');
}"""


def test_kernel_restart_mid_run_leaves_no_worker_and_nothing_in_dev_shm(lab_page, lab_server):
    page = lab_page
    shm_before = set(os.listdir("/dev/shm"))
    evaluate(page, OPEN_AND_RUN_JS, [NOTEBOOK, LONG_CELL], timeout_s=120)
    try:
        page.wait_for_function(f"({ACTIVE_OUTPUT_JS})().includes('kernel pid')", timeout=120_000)
        kernel = int(re.search(r"kernel pid (\d+)", page.evaluate(ACTIVE_OUTPUT_JS)).group(1))
        started = wait_until(lambda: len(descendants(kernel)[1]) >= 2, 60)
        assert started is not None, "the data-parallel workers did not start"
        time.sleep(1.0)  # well into the training loop
        everyone, workers = descendants(kernel)
        assert new_shm(shm_before), "a running data-parallel run has shared memory in /dev/shm"

        # Kernel > Restart Kernel..., then the dialog's "Restart" button, as a learner does.
        page.evaluate("() => { window.jupyterapp.commands.execute('kernelmenu:restart'); }")
        page.locator(".jp-Dialog .jp-mod-accept").click(timeout=30_000)
        t0 = time.monotonic()
        gone = wait_until(lambda: not any(running(p) for p in everyone + [kernel]), 10.0)
        left = [f"{p} {cmdline(p)}" for p in everyone if running(p)]
        assert gone is not None, f"10 s after the restart still running: {left}"
        clean = wait_until(lambda: not new_shm(shm_before), 10.0 - (time.monotonic() - t0))
        assert clean is not None, f"10 s after the restart left in /dev/shm: {sorted(new_shm(shm_before))}"
        print(f"kernel restart: {len(workers)} workers and the kernel gone {gone * 1000:.0f} ms after "
              "the click; /dev/shm clean")
        # the server has started the new kernel (closing the notebook before that fails)
        assert wait_until(lambda: "Kernel restarted" in lab_server.log_tail(100_000), 120, 0.2) is not None
        page.wait_for_function(
            "window.jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status === 'idle'",
            timeout=120_000,
        )
    finally:
        evaluate(page, """async () => {
          const panel = window.jupyterapp.shell.currentWidget;
          if (!panel || !panel.sessionContext) return;
          await panel.sessionContext.shutdown();
          panel.context.model.dirty = false;
          panel.dispose();
        }""", timeout_s=60)
