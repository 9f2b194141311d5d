"""unique_hex: ids without a system call each, still unique across forked processes."""

from __future__ import annotations

import os
import warnings

from toolfleet.shared.ids import unique_hex


def test_ids_are_new_and_of_the_length_asked() -> None:
    ids = {unique_hex() for _ in range(10_000)}
    assert len(ids) == 10_000 and all(len(i) == 32 for i in ids)
    assert len(unique_hex(8)) == 8 and int(unique_hex(16), 16) >= 0
    odd = {unique_hex(7) for _ in range(2_000)}  # odd lengths too, every digit in use
    assert all(len(i) == 7 for i in odd) and {i[0] for i in odd} == set("0123456789abcdef")


def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    read, write = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns of forking a threaded process
        warnings.simplefilter("ignore", DeprecationWarning)
        child = os.fork()
    if child == 0:  # the child's next id: its parent's next one, were it not reseeded
        os.write(write, unique_hex().encode())
        os._exit(0)
    os.waitpid(child, 0)
    assert os.read(read, 64).decode() != unique_hex()
