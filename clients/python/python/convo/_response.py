"""A provider's response object as the JSON object ``session/add_response`` sends.

A dict (the HTTP body as decoded, or a hand-built one) is sent as it is, member order and
all. A provider SDK's object (a pydantic model: ``anthropic.types.Message``, OpenAI's
``Response`` and ``ChatCompletion``, google-genai's ``GenerateContentResponse`` and
Interactions ``Interaction``) is
dumped the way the SDKs themselves send a model back in a request body:

- ``mode="json"``, ``by_alias=True``: the API's member names (google-genai's camelCase,
  OpenAI's ``async`` for the field ``async_``), not the Python attribute names;
- ``exclude_unset=True``: exactly the members the API sent. Without it pydantic adds every
  optional field the SDK knows but the response lacked as ``null`` (Anthropic text blocks
  gain ``citations: null``, Responses reasoning items ``content: null, status: null``,
  Chat messages ``audio: null, function_call: null``), which the provider never sent and
  some refuse on the way back. Members the API sent as ``null`` are kept: no
  ``exclude_none``;
- every nested model's ``__api_exclude__`` left out (client-side fields such as
  ``parsed_output``, which the API refuses as input);
- ``bytes`` (google-genai's ``thought_signature``) as standard base64, as the REST API
  sent them: pydantic's JSON mode writes them URL-safe, which is not the same string.

Member order is the SDK's: pydantic keeps a model's fields in their declaration order,
not the order of the HTTP body, so that order is already gone once the SDK has parsed
the response (providers read JSON objects by name). To store the body byte for byte as
it came, give the decoded HTTP body instead (``raw = client.messages.with_raw_response
.create(...)``; ``raw.http_response.json()``).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

__all__ = ["response_object"]


def response_object(response: Any) -> dict[str, Any]:
    """The JSON object to send for ``response`` (see the module's docstring)."""
    if isinstance(response, Mapping):
        return dict(response)
    dump = getattr(response, "model_dump", None)
    if not callable(dump):
        raise TypeError(
            "response: a provider's response as a dict, or the SDK object its client returned "
            f"(a pydantic model), got {type(response).__name__}"
        )
    exclude = _api_exclude(response) or None
    body = dump(mode="json", by_alias=True, exclude_unset=True, exclude=exclude)
    if not isinstance(body, dict):
        raise TypeError(f"response: {type(response).__name__}.model_dump() gave no JSON object")
    if _has_bytes_fields(response):
        raw = dump(mode="python", by_alias=True, exclude_unset=True, exclude=exclude)
        body = _standard_base64(body, raw)
    return body


# ---------------------------------------------------------------- __api_exclude__


def _is_model(value: Any) -> bool:
    return isinstance(getattr(type(value), "model_fields", None), dict) and callable(
        getattr(value, "model_dump", None)
    )


def _api_exclude(value: Any) -> dict[Any, Any]:
    """A pydantic ``exclude`` leaving out every nested model's ``__api_exclude__``."""
    if isinstance(value, (list, tuple)):
        return {i: spec for i, item in enumerate(value) if (spec := _api_exclude(item))}
    if isinstance(value, Mapping):
        return {k: spec for k, item in value.items() if (spec := _api_exclude(item))}
    if not _is_model(value):
        return {}
    spec = _spec(getattr(value, "__api_exclude__", None))
    names = getattr(value, "model_fields_set", None) or type(value).model_fields
    extra = getattr(value, "__pydantic_extra__", None) or {}
    for name in dict.fromkeys([*names, *extra]):
        if spec.get(name) is True:
            continue
        sub = _api_exclude(extra[name] if name in extra else getattr(value, name, None))
        if sub:
            spec[name] = _merge(spec.get(name), sub)
    return spec


def _spec(value: Any) -> dict[Any, Any]:
    """An ``exclude`` given as a set or a (nested) mapping, as a nested dict."""
    if isinstance(value, Mapping):
        return {k: True if v is True or v is ... else _spec(v) for k, v in value.items()}
    if isinstance(value, (set, frozenset, list, tuple)):
        return {k: True for k in value}
    return {}


def _merge(a: Any, b: Any) -> Any:
    if a is True or b is True:
        return True
    merged = dict(a or {})
    for k, v in b.items():
        merged[k] = _merge(merged.get(k), v)
    return merged


# ---------------------------------------------------------------- bytes


def _has_bytes_fields(value: Any) -> bool:
    """Whether a model holds ``bytes`` anywhere (only then is a second dump needed)."""
    if isinstance(value, (bytes, bytearray)):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_bytes_fields(v) for v in value)
    if isinstance(value, Mapping):
        return any(_has_bytes_fields(v) for v in value.values())
    if _is_model(value):
        extra = getattr(value, "__pydantic_extra__", None) or {}
        return any(_has_bytes_fields(getattr(value, n, None)) for n in type(value).model_fields) or any(
            _has_bytes_fields(v) for v in extra.values()
        )
    return False


def _standard_base64(body: Any, raw: Any) -> Any:
    """``body`` (the JSON-mode dump) with each value that is ``bytes`` in ``raw`` (the
    Python-mode dump of the same model) written as standard base64."""
    if isinstance(raw, (bytes, bytearray)):
        return base64.b64encode(raw).decode("ascii")
    if isinstance(body, dict) and isinstance(raw, dict):
        for k, v in raw.items():
            if k in body:
                body[k] = _standard_base64(body[k], v)
    elif isinstance(body, list) and isinstance(raw, (list, tuple)):
        for i, v in enumerate(raw[: len(body)]):
            body[i] = _standard_base64(body[i], v)
    return body
