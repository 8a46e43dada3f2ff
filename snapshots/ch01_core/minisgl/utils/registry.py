"""注册表：名字 → 实现（类，或造对象的函数）。

用户在配置里按名字选实现（模型架构、注意力后端、前缀缓存……），名字不对时报一条中文错误，
列出可选的名字。每一种东西一张表，登记都写成 ``@表.register("名字")``。
"""

from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str) -> None:
        self.kind = kind  # 报错时的叫法，例如 "注意力后端"
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """装饰器：把被装饰的类或函数登记在 name 下，原样返回它。"""

        def add(item: T) -> T:
            assert name not in self._items, f"{self.kind} {name!r} 登记了两次"
            self._items[name] = item
            return item

        return add

    def __getitem__(self, name: str) -> T:
        if name not in self._items:
            choices = "、".join(repr(n) for n in self._items)
            raise ValueError(f"不支持的{self.kind} {name!r}，可选：{choices}")
        return self._items[name]

    def __delitem__(self, name: str) -> None:
        del self._items[name]

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
