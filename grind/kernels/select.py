"""Which kernel parses a grammar: the split-head DMV kernel for a complete DMV
grammar, the segmentation kernel for a template (morphology) grammar, the
general CKY kernel for every other grammar."""
from __future__ import annotations

from grind import log
from grind.errors import InputError
from grind.grammars.dmv import START, classify_rule, dmv_problem, split_heads
from grind.kernels.contract import ChartParser

#: The --kernel choices.
KERNELS = ("auto", "cky", "dmv", "segment")


def make_parser(grammar, sentences, kernel: str = "auto") -> ChartParser:
    """The fastest kernel that can parse ``grammar``: the DMV kernel for a
    complete split-head DMV grammar (:func:`grind.grammars.dmv.dmv_problem`; symbol
    names alone are not enough), the general CKY kernel otherwise, with a
    message when the grammar looks like a DMV (its header says ``# model:
    dmv``, or it uses the DMV's symbol names) but is not one.

    A template grammar (:func:`grind.kernels.segment.template_problem`:
    ``Word --> slots`` and lexical slot rules only) goes to the segmentation
    kernel (``kernel="segment"`` insists on it).

    ``kernel="cky"`` forces the general kernel; for a DMV grammar the
    sentences are then split (``h -> h_l h_r``), the cross-check of the two.
    Each kernel's module is imported only when it is chosen (the CKY kernel's
    dense path imports SciPy for BLAS).
    """
    if kernel in ("auto", "segment"):
        from grind.kernels.segment import SegmentParser, template_problem
        seg_why = template_problem(grammar)
        if kernel == "segment" and seg_why is not None:
            raise InputError(f"--kernel segment needs a template (morphology) grammar: {seg_why}")
        if seg_why is None:
            return SegmentParser(grammar, sentences)
    why = dmv_problem(grammar)
    dmv = why is None
    if kernel == "dmv" and not dmv:
        raise InputError(f"--kernel dmv needs a complete split-head DMV grammar (see grind make-grammar dmv), "
                         f"but this one is not: {why}")
    if kernel == "auto" and not dmv:
        _note_not_dmv(grammar, why)
    if dmv and kernel in ("auto", "dmv"):
        from grind.kernels.dmv import DMVParser
        return DMVParser(grammar, sentences)
    if dmv:
        sentences = [split_heads(s) for s in sentences]
    from grind.kernels.cky import CKYParser
    return CKYParser(grammar, sentences)


def _note_not_dmv(grammar, why) -> None:
    """Tell the user when a grammar that looks like a DMV goes to the CKY kernel."""
    msg = f"not a complete DMV grammar ({why}): using the general CKY kernel"
    if grammar.meta.get("model") == "dmv":
        log.warn(f"the header says '# model: dmv' but the grammar is {msg}")
    elif grammar.start == START and any(classify_rule(grammar, lhs, rhs) is not None
                                        for lhs, rhs in grammar.iter_rules()):
        log.info(f"the grammar uses DMV symbol names but is {msg}")
