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
    course_lib.parallel.engine.workers only (every trainer and chapter 01's experiment start
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
        if lines and rel != "parallel/engine/workers.py":
            found[rel] = lines
    assert found == {}, f"processes started outside parallel/engine/workers.py: {found}"
    assert starts.search("proc = self.mp_context.Process(")  # the pattern sees the real one
    assert not starts.search("with WorkerPool(model, x, y, 2) as pool:")  # a course class


def test_only_the_process_layer_makes_contexts_pipes_barriers_and_shared_memory():
    """Contexts, pipes, barriers and shared memory are made by the process layer only
    (workers, shm and the one launcher every trainer uses); the doctor may inspect the
    start method."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "course_lib"
    # A threading.Barrier is no multiprocessing object (it lives and dies with one process: the
    # graders' checks that run workers as threads of this process use one), so it is allowed.
    makes = re.compile(r"(?<![\w])(?<!threading\.)(get_context|Pipe|(?:Pipe)?Barrier|SharedMemory)\(")
    allowed = {"parallel/engine/workers.py", "parallel/engine/shm.py", "parallel/engine/launch.py"}
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
    for seen in ("barrier = mp.Barrier(2)", "b = multiprocessing.Barrier(parties)", "ctx.Barrier(3)"):
        assert makes.search(seen), seen  # and a multiprocessing barrier, however it is reached
    assert not makes.search("self.barrier = threading.Barrier(parties)")  # a barrier of threads only


# ------------------------------------------------------------------ the import graph
#: The floors of the package, lowest first: a module imports only from its own floor or below.
#: Ground: helpers without ideas; ideas: the course's maths, pure functions (no processes,
#: no figures); processes: what runs on several processes (and the leak snapshots of its
#: tests, and the one-process references its trainers are checked against, which share its
#: argument check and batch split); then what shows the ideas (figures, checkers), the live
#: figures (sliders wired to the figures), the tools.
FLOORS = (
    ("ground", {"course_lib", "_validate", "timing", "progress", "typed_numbers", "datasets", "datapackage",
                "reference", "i18n"}),
    ("ideas", {"scaling", "cost", "alpha_beta", "memory", "megatron", "models", "cnn", "conv", "conv.*",
               "dataflow", "optim", "schedule", "planner", "overlap",
               "transformer", "tensor_cost", "precision", "moe", "context_cost", "failures"}),
    ("processes", {"parallel", "parallel.*", "testing", "staleness"}),
    ("measurements", {"rate", "roofline", "critical_batch"}),
    ("presentation", {"plots", "plots.*", "exercises", "exercises.*", "grading", "grading.*"}),
    ("live", {"live", "live.*"}),
    ("tools", {"tools", "tools.*", "__main__"}),
)

#: Import edges that close a circle today, each with who removes it. The test fails once an
#: edge listed here is gone, so that the list is emptied as the circles are cut.
KNOWN_CIRCLE_EDGES = {
}


def _module_names(root) -> dict:
    """``{"course_lib.x.y": path}`` for every module of the package (a package is its __init__)."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _imports(name: str, source: str, is_package: bool, modules) -> set:
    """The course_lib modules that ``source`` (module ``name``) imports, at module level or
    inside a function: ``from .x import f`` gives ``x``, ``from . import x`` gives ``x`` when
    ``x`` is a module, else the package."""
    import ast

    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "course_lib"}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if target.split(".")[0] == "course_lib":
                found |= {f"{target}.{a.name}" if f"{target}.{a.name}" in modules else target
                          for a in node.names}
    return found - {name}


def _import_graph() -> dict:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "course_lib"
    modules = _module_names(root)
    return {name: _imports(name, path.read_text(encoding="utf-8"), path.name == "__init__.py", modules)
            for name, path in modules.items()}


def _floor(name: str) -> int:
    short = name.removeprefix("course_lib.") if name != "course_lib" else name
    for level, (_, members) in enumerate(FLOORS):
        if short in members or any(m.endswith(".*") and short.startswith(m[:-1]) for m in members):
            return level
    raise KeyError(name)


def _circles(graph: dict) -> list:
    """Every strongly connected set of two or more modules (Tarjan), sorted."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def test_every_module_has_a_floor():
    graph = _import_graph()
    unplaced = []
    for name in graph:
        try:
            _floor(name)
        except KeyError:
            unplaced.append(name)
    assert unplaced == [], f"modules without a floor in tests/test_package.py FLOORS: {unplaced}"


def test_imports_point_down_and_close_no_circle():
    """No module imports one that stands on a higher floor, and the import graph (module-level
    and function-level imports) has no circle, apart from the listed edges being removed."""
    graph = _import_graph()
    up = sorted(f"{a} ({FLOORS[_floor(a)][0]}) -> {b} ({FLOORS[_floor(b)][0]})"
                for a, targets in graph.items() for b in targets if _floor(b) > _floor(a))
    assert up == [], "imports that point up: " + "; ".join(up)
    stale = [edge for edge in KNOWN_CIRCLE_EDGES if edge[1] not in graph.get(edge[0], ())]
    assert stale == [], f"listed circle edges that are gone (remove them from KNOWN_CIRCLE_EDGES): {stale}"
    for a, b in KNOWN_CIRCLE_EDGES:
        graph[a] = graph[a] - {b}
    assert _circles(graph) == [], f"import circles: {_circles(graph)}"


def test_the_import_graph_checks_can_fail():
    """The parser sees function-level and relative imports; circles and upward arrows are found."""
    modules = {"course_lib.a", "course_lib.p", "course_lib.p.b", "course_lib.p.c"}
    source = "from .. import a\nfrom . import c\ndef f():\n    from ..a import g\n    import course_lib.x\n"
    assert _imports("course_lib.p.b", source, False, modules) == {"course_lib.a", "course_lib.p.c",
                                                                 "course_lib.x"}
    assert "course_lib.datasets" in _import_graph()["course_lib.planner"]  # a function-level import
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _circles({"a": {"b"}, "b": set()}) == []
    assert _floor("course_lib.parallel.data") > _floor("course_lib.schedule")
    assert _floor("course_lib.plots.style") > _floor("course_lib.parallel.engine.workers")


def test_the_parallel_package_lists_its_modules():
    """course_lib/parallel/__init__.py's table names every module of the package, and only those."""
    import re
    from pathlib import Path

    import course_lib.parallel

    root = Path(course_lib.parallel.__file__).parent
    modules = {p.stem for p in root.glob("*.py") if p.stem != "__init__"}
    listed = set(re.findall(r"^``(\w+)``", course_lib.parallel.__doc__, re.M))
    assert listed == modules, f"not listed: {modules - listed}; listed but missing: {listed - modules}"


def test_the_live_package_lists_its_modules():
    """course_lib/live/__init__.py's table names every module of the package, and only those;
    the plot functions know nothing of it (no module of plots/ imports live)."""
    import re
    from pathlib import Path

    import course_lib.live

    root = Path(course_lib.live.__file__).parent
    modules = {p.stem for p in root.glob("*.py") if p.stem != "__init__"}
    listed = set(re.findall(r"^``(\w+)``", course_lib.live.__doc__, re.M))
    assert listed == modules, f"not listed: {modules - listed}; listed but missing: {listed - modules}"
    graph = _import_graph()
    up = sorted((a, b) for a, targets in graph.items() if a.startswith("course_lib.plots")
                for b in targets if b.startswith("course_lib.live"))
    assert up == [], f"plots/ imports live/: {up}"


#: Modules that still name a module or function that moved (issue 26; the lead's files):
#: the test fails once a listed reference is gone, so the list empties.
PENDING_REFERENCES: set[tuple[str, str]] = set()


def test_docstrings_name_what_exists():
    """Every fully qualified cross-reference (:func:`course_lib...`, :mod:, :class:, ...) in the
    package's sources names a module or attribute that exists (a moved function leaves none behind)."""
    import re
    from pathlib import Path

    from test_teaching_core import _resolve  # one resolver of dotted names for the tests

    role = re.compile(r":(?:func|mod|class|data|meth|attr|exc):`~?(course_lib[\w.]*)`")

    def exists(dotted: str) -> bool:
        try:
            _resolve(dotted)
        except (ImportError, AttributeError):
            return False
        return True

    root = Path(__file__).resolve().parent.parent / "course_lib"
    found = {(name, ref) for name, path in _module_names(root).items()
             for ref in role.findall(path.read_text(encoding="utf-8")) if not exists(ref)}
    assert not PENDING_REFERENCES - found, f"fixed, remove from PENDING_REFERENCES: {PENDING_REFERENCES - found}"
    assert found - PENDING_REFERENCES == set(), f"references to nothing: {sorted(found - PENDING_REFERENCES)}"
    assert exists("course_lib.schedule.Timeline.bubble") and not exists("course_lib.parallel.hybrid.best_config")


def test_the_readme_layout_names_every_module():
    """The README's layout section names every module of course_lib/ and of its floors and rooms
    (parallel/ and its train/ and engine/, conv/, live/)."""
    import fnmatch
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    block = readme.split("## How the repository is laid out", 1)[1].split("\n```\n", 2)[1]
    named = set(re.findall(r"[\w*]+\.py", block))
    rooms = ("course_lib", "course_lib/parallel", "course_lib/parallel/train", "course_lib/parallel/engine",
             "course_lib/conv", "course_lib/live")
    modules = {p.name for d in rooms for p in (root / d).glob("*.py") if not p.name.startswith("_")}
    missing = sorted(m for m in modules if not any(fnmatch.fnmatch(m, n) for n in named))
    assert missing == [], f"modules the README's layout does not name: {missing}"
    assert "conv_fast.py" not in named and fnmatch.fnmatch("conv_fast.py", "conv_*.py")  # a glob counts


def test_the_parallel_floors_hold():
    """course_lib/parallel/ in three floors: the algorithm files (parallel/*.py) import nothing
    from train/ (nor from the engine but its decorators that time a method from outside), and
    only train/ and engine/ use the process layer (ProcessGroup, Launcher) - the one exception,
    chapter 17's checker, builds a ProcessGroup to ask whether a target is importable and never
    starts it."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "course_lib"
    algorithm_files = sorted(p for p in (root / "parallel").glob("*.py") if p.name != "__init__.py")
    assert {p.stem for p in algorithm_files} >= {"allreduce", "data", "zero", "pipeline", "tensor", "pool"}
    wrong = {}
    for path in algorithm_files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                target = "." * node.level + (node.module or "")
                names = {a.name for a in node.names}
                if target.startswith((".train", "course_lib.parallel.train")) or (
                        target.startswith((".engine", "course_lib.parallel.engine"))
                        and not (target.endswith("clock") and names <= {"timed", "recorded"})
                        and not (target.endswith("gloo") and names <= {"require_torch"})
                        and not (target.endswith("crash") and names <= {"crash_point"})):
                    wrong.setdefault(path.name, []).append(f"from {target} import {sorted(names)}")
    assert wrong == {}, f"algorithm files importing from train/ or the engine: {wrong}"
    users = set()
    for path in root.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        if any(isinstance(n, (ast.Name, ast.Attribute)) and getattr(n, "id", getattr(n, "attr", None))
               in ("ProcessGroup", "Launcher") for n in ast.walk(ast.parse(text))):
            users.add(str(path.relative_to(root)))
    outside = {u for u in users if not u.startswith(("parallel/train/", "parallel/engine/"))}
    # the appendix's exercise and the scratch edition's graders run their processes through the engine too
    assert outside <= {"exercises/under_the_hood.py", "grading/harness.py"}, \
        f"the process layer used outside train/ and engine/: {outside}"


def test_chapter_pointers_live_only_in_the_readme_reading_guide():
    """The library says what its code does, not where a notebook shows it: no docstring or
    comment names a chapter or notebook by its number (those pointers go stale when chapters
    move; the README's reading guide, which tests/test_reading_guide.py keeps, holds them).
    The answer checkers (exercises/, one module per notebook) and the tools are exempt."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "course_lib"
    pointer = re.compile(r"\b(?:[Nn]otebooks?|[Cc]hapters?)\s+\d\d\b|\bnotebook section\b")
    found = {}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("exercises/", "tools/")):
            continue
        hits = [n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if pointer.search(line)]
        if hits:
            found[rel] = hits
    assert found == {}, f"chapter pointers outside the reading guide (file: lines): {found}"
    assert pointer.search("(notebook 10, section 1F1B)") and pointer.search("chapters 05-06")
