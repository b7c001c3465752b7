"""What a notebook's own code prints, in Chinese (issue 43 point 2): the string literals of the
code cells as messages, written back in their places and nowhere else.

No extra is needed: the module reads and writes Python with :mod:`ast` only.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from course_lib.tools import i18n_code as ic

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _code_cells(path: Path) -> list[tuple[str, str]]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [(c["id"], "".join(c["source"])) for c in cells if c["cell_type"] == "code"]


def _messages(source: str) -> list[str]:
    return [m for m, _ in ic.code_messages(source)]


# ------------------------------------------------------------------------ which literals
def test_printed_sentences_and_labels_are_messages():
    source = '''\
def f(x):
    """A docstring is no message."""
    return x
print(f"{n} workers took {t:.2f} s", "per step")
ax.set_xlabel("workers")
plot(xs, ys, title="speedup", label=f"N = {n}")
msg = ("the first half, " f"then {rest!r} and {{braces}}")
'''
    assert _messages(source) == ["{n} workers took {t:.2f} s", "per step", "speedup",
                                 "the first half, then {rest!r} and {{braces}}"]


def test_a_word_with_more_than_a_name_is_a_message_a_name_alone_is_not():
    source = 'print("before:", x, f"limit 1/(1-p) = {lim:.3f}", "BERT-Large", "v100_sxm2", "fits")'
    assert _messages(source) == ["before:", "limit 1/(1-p) = {lim:.3f}"]


def test_names_are_not_messages_keys_are_translated_alike():
    """Naming keywords and identifiers stay out (translating them changes what the code
    does); a key the notebook writes and looks up is a message, the same everywhere."""
    source = '''\
legend(loc="upper left", color="tab blue")
load("images_million", "BERT-Large", "device_id")
"a bare string statement"
runs = {"serial loop, whole batch": 1}
print(runs["serial loop, whole batch"] == 1, "serial loop, whole batch" in runs)
'''
    assert _messages(source) == ["serial loop, whole batch"] * 3
    out = ic.translate_code(source, {"serial loop, whole batch": "串行循环，整个批次"})
    scope = {"legend": lambda **kw: None, "load": lambda *a: None, "print": lambda *a: printed.append(a)}
    printed: list = []
    exec(compile(out, "<cell>", "exec"), scope)  # noqa: S102 - the cell as the Chinese edition runs it
    assert printed == [(True, True)] and scope["runs"] == {"串行循环，整个批次": 1}


def test_a_label_keyword_makes_one_word_a_message_and_fields_are_not_words():
    assert _messages('slider(description="workers")') == ["workers"]
    assert _messages('x = f"{long_name} {other_name}"') == []  # only fields: nothing to translate


def test_ipython_lines_keep_the_lines_and_columns_and_other_cells_have_none():
    source = '%%time\nprint("two words")\n!ls -l\nx = 1 # "not a literal"\n'
    assert ic.code_messages(source) == [("two words", 2)]
    assert ic.code_messages("%%bash\necho hello world\nif then") == []


def test_bad_input_names_the_parameter():
    with pytest.raises(TypeError, match="source"):
        ic.code_messages(b"print('a b')")
    with pytest.raises(TypeError, match="source"):
        ic.translate_code(None, {})


# ------------------------------------------------------------------------ templates round trip
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_literal_written_back_from_its_template_is_the_same_code(path):
    """An independent check of the template: each literal, rewritten from its template alone,
    gives the cell the same syntax tree (implicit concatenations become one literal)."""
    for cell_id, source in _code_cells(path):
        masked = ic._mask_magics(source)
        same = ic.translate_code(source, {m: m for m in _messages(source)})
        assert same == source, cell_id  # an identity translation changes nothing
        rewritten = ic._rewrite(masked, ic._code)
        assert ast.dump(ast.parse(rewritten)) == ast.dump(ast.parse(masked)), f"{path.name} {cell_id}"


def test_every_code_cell_is_python_to_the_extractor():
    """A cell the extractor cannot parse would silently keep its English: none exists."""
    bad = []
    for path in NOTEBOOKS:
        for cell_id, source in _code_cells(path):
            try:
                ast.parse(ic._mask_magics(source))
            except SyntaxError as exc:
                bad.append(f"{path.name} {cell_id}: {exc}")
    assert not bad


# ------------------------------------------------------------------------ writing translations
def test_a_translation_replaces_the_literal_and_nothing_else():
    source = 'x = "→"; print(f"{n} workers took {t:.2f} s",\n      "per step")  # a comment\n'
    table = {"{n} workers took {t:.2f} s": "{n} 个工作进程用时 {t:.2f} s", "per step": "每步"}
    out = ic.translate_code(source, table)
    assert out == 'x = "→"; print(f"{n} 个工作进程用时 {t:.2f} s",\n      \'每步\')  # a comment\n'
    call = ast.parse(out).body[1].value
    scope = {"n": 4, "t": 1.5}
    assert [eval(compile(ast.Expression(a), "<cell>", "eval"), scope) for a in call.args] == \
        ["4 个工作进程用时 1.50 s", "每步"]  # noqa: S307


def test_a_concatenation_becomes_one_literal_with_the_right_quotes():
    source = "print('a long sentence, ' f\"with {d['key']} \"\n      'and \"quotes\" at the end')\n"
    (message,) = _messages(source)
    assert message == "a long sentence, with {d['key']} and \"quotes\" at the end"
    out = ic.translate_code(source, {message: "一个长句子，含 {d['key']} 和“引号”\\ 结尾"})
    literal = ast.parse(out).body[0].value.args[0]
    assert eval(compile(ast.Expression(literal), "<cell>", "eval"), {"d": {"key": 7}}) == \
        "一个长句子，含 7 和“引号”\\ 结尾"  # noqa: S307


def test_a_string_field_and_a_spec_may_change_an_expression_may_not():
    msgid = "{'serial':>7} {n:4d} workers: {t * 1000.0:.1f} ms {name!r}"
    assert ic.literal_problems(msgid, "{'串行':>9} {n:6d} 个工作进程：{t * 1000.0:.1f} ms {name!r}") == []
    assert ic.literal_problems(msgid, "{name!r} {t * 1000.0:.1f} ms {n:4d} {'串行':>7}") == []  # reordered
    for broken in ("{'串行':>7} {m:4d} 个：{t * 1000.0:.1f} ms {name!r}",  # another variable
                   "{'串行':>7} {n:4d} 个：{t:.1f} ms {name!r}",  # another expression
                   "{'串行':>7} {n:4d} 个：ms {name!r}",  # a field lost
                   "{'串行':>7} {n:4d} 个：{t * 1000.0:.1f} ms {name}",  # the conversion lost
                   "{'串行':>7} {n:4d} 个 {{：{t * 1000.0:.1f} ms {name!r}",  # fine: a doubled brace
                   "{'串行':>7} {n:4d 个：{t * 1000.0:.1f} ms {name!r}"):  # a field never closed
        problems = ic.literal_problems(msgid, broken)
        assert bool(problems) == ("{{" not in broken), broken
    cond = "{('fits' if ok else 'does not fit')}, {n} devices"
    assert ic.literal_problems(cond, "{n} 个设备，{('放得下' if ok else '放不下')}") == []  # strings inside a field
    assert ic.literal_problems(cond, "{('放得下' if fits else '放不下')}，{n} 个设备") != []  # not its names
    assert ic.literal_problems("two words", "两个 { 词") != []  # a plain message may not open a field
    assert ic.literal_problems("two words", "两个词") == []


def test_a_table_heading_made_of_fields_is_a_message_a_key_inside_a_field_is_not():
    source = ('print(f"{\'latency\':>9} {\'total\':>9}")\n'
              'print(f"{row[\'seconds\'] * 1e3:6.1f} ms")\n'
              'print(f"{\'above\' if d > 0 else \'below\'}")\n')
    assert _messages(source) == ["{'latency':>9} {'total':>9}", "{'above' if d > 0 else 'below'}"]


def test_a_widgets_label_is_a_message_its_name_and_unit_are_not():
    source = 'Slider("bandwidth_gbit", "link", 0, 3, 0.1, 1, unit="devices", kind="log")\ncheck(a, 3, unit="devices")'
    assert _messages(source) == ["link"]  # not the name, the kind, the unit (the widget reads it)
