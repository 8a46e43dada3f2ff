"""代码清单按文件和符号摘取：类、方法（去掉缩进）、带装饰器的函数、整文件；找不到时列出可选符号。"""

import pytest

from minibook.listing import ListingError, extract, symbols

SOURCE = '''"""模块"""
import functools

LIMIT = 3


@functools.lru_cache
def cached(x):
    return x + 1


class Box:
    """盒子"""

    size: int = 1

    def grow(self, n):
        self.size += n
        return self.size

    @property
    def empty(self):
        return self.size == 0
'''


@pytest.fixture
def src(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(SOURCE, encoding="utf-8")
    return path


def test_function_with_decorator(src):
    assert extract(src, "cached") == "@functools.lru_cache\ndef cached(x):\n    return x + 1"


def test_method_is_dedented(src):
    assert extract(src, "Box.empty") == "@property\ndef empty(self):\n    return self.size == 0"
    assert extract(src, "Box.grow").startswith("def grow(self, n):\n    self.size += n")


def test_class_and_assignment_and_whole_file(src):
    assert extract(src, "Box").splitlines()[0] == "class Box:"
    assert extract(src, "Box").splitlines()[-1] == "        return self.size == 0"
    assert extract(src, "LIMIT") == "LIMIT = 3"
    assert extract(src) == SOURCE.rstrip("\n")


def test_missing_symbol_lists_choices(src):
    with pytest.raises(ListingError, match="没有符号 Box.shrink；可选的有：LIMIT, cached, Box, Box.size, Box.grow, Box.empty"):
        extract(src, "Box.shrink")
    assert symbols(SOURCE) == ["LIMIT", "cached", "Box", "Box.size", "Box.grow", "Box.empty"]


def test_a_cpp_function_with_its_comment(tmp_path):
    path = tmp_path / "k.cpp"
    path.write_text("#include <x>\n\nnamespace {\n\n// 把两个数加起来\n// 第二行注释\nint add(int a, int b) {\n"
                    "  if (a) {\n    return a + b;\n  }\n  return b;\n}\n\n}  // namespace\n\nTORCH_LIBRARY(m, x) { x.def(\"add\"); }\n")
    assert extract(path, "add") == ("// 把两个数加起来\n// 第二行注释\nint add(int a, int b) {\n  if (a) {\n"
                                    "    return a + b;\n  }\n  return b;\n}")
    with pytest.raises(ListingError, match="没有顶格定义的函数 sub；可选的有：add"):
        extract(path, "sub")


def test_a_cpp_template_keeps_its_template_line_and_the_comment_above_it(tmp_path):
    path = tmp_path / "k.cpp"
    path.write_text("int before() {\n  return 0;\n}\n\n// N 是编译期常数\ntemplate <int N>\nint times(int a) {\n"
                    "  return a * N;\n}\n")
    assert extract(path, "times") == "// N 是编译期常数\ntemplate <int N>\nint times(int a) {\n  return a * N;\n}"
