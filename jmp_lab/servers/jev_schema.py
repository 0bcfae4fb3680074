"""Request validation for the Jev test server, shaped like FastAPI's 422 `detail[]`."""

from __future__ import annotations

from typing import Any

TEXT = (str, dict, list)  # instructions, descriptions and state may be structured
MAX_OPTIONS = 255
MAX_LEVELS = 10


def _err(loc: list[Any], msg: str, typ: str) -> dict[str, Any]:
    return {"loc": ["body", *loc], "msg": msg, "type": typ}


def validation_errors(body: Any) -> list[dict[str, Any]]:
    """Every problem with a System One request body; empty when it is valid."""
    if not isinstance(body, dict):
        return [_err([], "Input should be a valid dictionary", "dict_type")]
    errs = [
        _err([k], "Field required", "missing")
        for k in ("state", "model", "questions")
        if k not in body
    ]
    if "state" in body and not isinstance(body["state"], TEXT):
        errs.append(_err(["state"], "Input should be a string, object or array", "union_type"))
    if "model" in body and not isinstance(body["model"], str):
        errs.append(_err(["model"], "Input should be a valid string", "string_type"))
    questions = body.get("questions")
    if "questions" not in body:
        return errs
    if not isinstance(questions, dict):
        return [*errs, _err(["questions"], "Input should be a valid dictionary", "dict_type")]
    if not questions:
        return [*errs, _err(["questions"], "Dictionary should have at least 1 item", "too_short")]
    for qid, question in questions.items():
        errs += _question_errors(qid, question)
    return errs


def _question_errors(qid: str, question: Any) -> list[dict[str, Any]]:
    loc: list[Any] = ["questions", qid]
    if not qid:
        return [_err(loc, "Question id must not be empty", "string_too_short")]
    if not isinstance(question, dict):
        return [_err(loc, "Input should be a valid dictionary", "model_attributes_type")]
    qtype = question.get("type")
    if qtype not in ("noul", "choice", "score"):
        return [
            _err(
                loc, f"Unknown question type {qtype!r}: noul, choice or score", "union_tag_invalid"
            )
        ]
    loc.append(qtype)
    errs = []
    ins = question.get("instructions")
    if ins is not None and not isinstance(ins, TEXT):
        errs.append(_err([*loc, "instructions"], "Input should be a valid string", "string_type"))
    check = {"noul": _noul_errors, "choice": _choice_errors, "score": _score_errors}[qtype]
    return errs + check(loc, question.get("criteria"))


def _noul_errors(loc: list[Any], crit: Any) -> list[dict[str, Any]]:
    if crit is None:
        return []
    if not isinstance(crit, dict) or set(crit) - {"true", "false"}:
        return [_err([*loc, "criteria"], "Input should have only 'true' and 'false'", "model_type")]
    return [
        _err([*loc, "criteria", k], "Input should be a valid string", "string_type")
        for k, v in crit.items()
        if v is not None and not isinstance(v, TEXT)
    ]


def _choice_errors(loc: list[Any], crit: Any) -> list[dict[str, Any]]:
    if not isinstance(crit, dict):
        return [_err([*loc, "criteria"], "Input should be a valid dictionary", "dict_type")]
    if not 1 <= len(crit) <= MAX_OPTIONS:
        return [_err([*loc, "criteria"], f"Expected 1 to {MAX_OPTIONS} options", "too_long")]
    return [
        _err([*loc, "criteria", name], "Input should be a valid string", "string_type")
        for name, desc in crit.items()
        if not name or (desc is not None and not isinstance(desc, TEXT))
    ]


def _score_errors(loc: list[Any], crit: Any) -> list[dict[str, Any]]:
    if not isinstance(crit, list):
        return [_err([*loc, "criteria"], "Input should be a valid list", "list_type")]
    if not 1 <= len(crit) <= MAX_LEVELS:
        return [_err([*loc, "criteria"], f"Expected 1 to {MAX_LEVELS} levels", "too_long")]
    return [
        _err([*loc, "criteria", i], "Input should be a valid string", "string_type")
        for i, level in enumerate(crit)
        if not isinstance(level, TEXT)
    ]
