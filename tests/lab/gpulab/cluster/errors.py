"""Errors of the lab's virtual Kubernetes API, answered as Kubernetes Status bodies."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from gpulab.cluster.objects import Obj, ResourceType


class ApiError(Exception):
    """An error the API returns as a Kubernetes Status body."""

    def __init__(self, code: int, reason: str, message: str,
                 details: Optional[Dict[str, Any]] = None):
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> Obj:
        body: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                     "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            body["details"] = self.details
        return body


def qualified(rt: ResourceType) -> str:
    return rt.plural if not rt.group else "%s.%s" % (rt.plural, rt.group)


def error_details(rt: ResourceType, name: str) -> Dict[str, Any]:
    body: Dict[str, Any] = {"name": name, "kind": rt.plural}
    if rt.group:
        body["group"] = rt.group
    return body


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, "NotFound", '%s "%s" not found' % (qualified(rt), name),
                    error_details(rt, name))


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", '%s "%s" already exists' % (qualified(rt), name),
                    error_details(rt, name))


def conflict(rt: ResourceType, name: str, why: str = "the object has been modified; please "
             "apply your changes to the latest version and try again") -> ApiError:
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                    % (qualified(rt), name, why), error_details(rt, name))


def invalid(rt: ResourceType, name: str, causes: List[Tuple[str, str]]) -> ApiError:
    """causes: (field, message) pairs; message starts with the k8s error type words."""
    causes_body = []
    for field_path, message in causes:
        reason = "FieldValueInvalid"
        for prefix, cause_reason in (("Required value", "FieldValueRequired"),
                                     ("Forbidden", "FieldValueForbidden"),
                                     ("Unsupported value", "FieldValueNotSupported"),
                                     ("Duplicate value", "FieldValueDuplicate")):
            if message.startswith(prefix):
                reason = cause_reason
        causes_body.append({"reason": reason, "message": message, "field": field_path})
    body: Dict[str, Any] = {"name": name, "kind": rt.kind, "causes": causes_body}
    if rt.group:
        body["group"] = rt.group
    text = "; ".join("%s: %s" % (f, m) for f, m in causes)
    if len(causes) > 1:
        text = "[%s]" % ", ".join("%s: %s" % (f, m) for f, m in causes)
    return ApiError(422, "Invalid", '%s.%s "%s" is invalid: %s'
                    % (rt.kind, rt.group, name, text) if rt.group else
                    '%s "%s" is invalid: %s' % (rt.kind, name, text), body)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unsupported_patch_type() -> ApiError:
    return ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown "
                    "format - accepted media types include: application/json-patch+json, "
                    "application/merge-patch+json, application/apply-patch+yaml")


def resource_not_found(what: str = "") -> ApiError:
    """The answer for a path or resource the server does not serve."""
    suffix = " (%s)" % what if what else ""
    return ApiError(404, "NotFound", "the server could not find the requested resource" + suffix,
                    {})


__all__ = ["ApiError", "not_found", "already_exists", "conflict", "invalid", "bad_request",
           "resource_not_found", "unsupported_patch_type", "qualified", "error_details"]
