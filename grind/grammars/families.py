"""Tag families: which tags behave alike (nouns, verbs, ...), for the
logistic-normal priors' covariance (``--cov families``) and shared experts
(``--tie``).  The shipped maps (grind/data/families-upos.txt, families-ptb.txt)
put every UPOS / PTB tag in one family."""
from __future__ import annotations

import os

from grind.errors import InputError
from grind.formats.textio import two_columns

#: ``--families`` names of the shipped family files.
FAMILY_FILES = {"upos": "families-upos.txt", "ptb": "families-ptb.txt"}


def families_path(name: str) -> str:
    """``upos`` / ``ptb`` -> the shipped family file; anything else is a path."""
    if name in FAMILY_FILES:
        return os.path.join(os.path.dirname(os.path.dirname(__file__)), "data", FAMILY_FILES[name])
    return name


def read_families(path: str) -> dict:
    """A family mapping file: ``TAG FAMILY`` per line; lines starting with
    ``#`` are comments (no inline comments: ``#`` and ``$`` are PTB tags); a
    leading backslash escapes a tag, so the PTB tag ``#`` is written ``\\#``.
    A tag listed twice is an error."""
    fam: dict[str, str] = {}
    for lineno, first, family in two_columns(families_path(path), path, "'TAG FAMILY'"):
        tag = first[1:] if first.startswith("\\") and len(first) > 1 else first
        if tag in fam:
            raise InputError(f"{path}:{lineno}: tag {tag!r} is already in family {fam[tag]}")
        fam[tag] = family
    if not fam:
        raise InputError(f"{path}: no 'TAG FAMILY' lines: an empty tag-family mapping")
    return fam
