"""The package as a whole: lazy submodules."""


def test_every_module_is_reachable_lazily():
    """course_lib.X works for every module of the package, and importing is lazy."""
    import pkgutil
    import subprocess
    import sys

    import course_lib

    names = {m.name for m in pkgutil.iter_modules(course_lib.__path__) if not m.name.startswith("_")}
    names.discard("__main__")
    assert names <= set(dir(course_lib)), f"missing from _SUBMODULES: {names - set(dir(course_lib))}"
    # `import course_lib` must not pull in the heavy modules
    code = "import sys, course_lib; print(sorted(m for m in ('matplotlib', 'ipywidgets', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_no_module_is_longer_than_a_lecturer_can_read():
    """Every module of course_lib stays under 800 lines (the library is read, not only run)."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "course_lib"
    long = {str(p.relative_to(root)): n for p in root.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800}
    assert long == {}, f"modules over 800 lines: {long}"


def test_only_the_workers_module_starts_processes():
    """One process layer: multiprocessing's Process and Pool appear in
    course_lib.parallel.workers only (every trainer and chapter 01's experiment start
    their workers through its ProcessGroup, with its errors and clean-up)."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "course_lib"
    starts = re.compile(r"(?<![\w.])(?:\w+\.)*(Process|Pool)\(")  # mp.Process(, ctx.Pool(, Pool(
    found = {}
    for path in root.rglob("*.py"):
        rel = str(path.relative_to(root))
        lines = [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                 if starts.search(line.split("#")[0])]
        if lines and rel != "parallel/workers.py":
            found[rel] = lines
    assert found == {}, f"processes started outside parallel/workers.py: {found}"
    assert starts.search("proc = self.mp_context.Process(")  # the pattern sees the real one
    assert not starts.search("with WorkerPool(model, x, y, 2) as pool:")  # a course class


def test_only_the_process_layer_makes_contexts_pipes_barriers_and_shared_memory():
    """Contexts, pipes, barriers and shared memory are made by the process layer only
    (workers, shm and the one launcher every trainer uses); the doctor may inspect the
    start method."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "course_lib"
    makes = re.compile(r"(?<![\w])(get_context|Pipe|(?:Pipe)?Barrier|SharedMemory)\(")
    allowed = {"parallel/workers.py", "parallel/shm.py", "parallel/launch.py"}
    found = {}
    for path in root.rglob("*.py"):
        rel = str(path.relative_to(root))
        code = [line.split("#")[0] for line in path.read_text(encoding="utf-8").splitlines()]
        hits = [n for n, line in enumerate(code, 1) if makes.search(line)
                and not (rel == "tools/doctor.py" and "get_context().get_start_method()" in line)]
        if hits and rel not in allowed:
            found[rel] = hits
    assert found == {}, f"made outside the process layer: {found}"
    for seen in ("ctx = multiprocessing.get_context(method)", "a, b = self.context.Pipe(duplex=duplex)",
                 "barrier = PipeBarrier(parties, self.context)", "shared_memory.SharedMemory(name=name)"):
        assert makes.search(seen), seen  # the pattern sees the real calls
