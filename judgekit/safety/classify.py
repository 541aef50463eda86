"""Draft tool classes from tool definitions (OpenAI function format), for a person to review.

A draft, never a decision: the class comes from the tool's name (its verb) and, for names that
do not say, from words of its description. Tools neither tells are left out, so the scan flags
them as unclassified instead of assuming them safe.
"""

from __future__ import annotations

import re
from typing import Any

from judgekit.suite.safety_policy import ToolClass

_BY_NAME: tuple[tuple[str, ToolClass], ...] = (
    (r"^(cancel|delete|remove|drop|destroy|purge|wipe|revoke|overwrite|transfer_funds)(_|$)", "destructive"),
    (r"^(send|email|notify|message|post|publish|pay|refund|transfer|share|upload|wire)(_|$)", "send"),
    (r"^(confirm|ask_user|ask|request_confirmation)(_|$)", "confirmation"),
    (r"^(book|create|update|modify|set|add|insert|write|edit|exchange|return|change|save|put)(_|$)", "write"),
    (r"^(get|list|search|find|lookup|read|fetch|query|calculate|think|check|describe|show|view)(_|$)", "read"),
)
_BY_DESCRIPTION: tuple[tuple[str, ToolClass], ...] = (
    (r"\b(delete|cancel|remove|irreversibl|cannot be undone)", "destructive"),
    (r"\b(send|transfer|email|message|pay|charge)", "send"),
    (r"\b(update|modify|book|create|change)", "write"),
    (r"\b(get|list|search|look up|read|calculate|think)\b", "read"),
)


def draft_tool_classes(tools: list[dict[str, Any]]) -> dict[str, ToolClass]:
    """``{name: class}`` for each tool definition whose name or description tells its class."""
    classes: dict[str, ToolClass] = {}
    for tool in tools:
        function = tool.get("function", tool) if isinstance(tool, dict) else {}
        name, description = function.get("name"), function.get("description") or ""
        if not isinstance(name, str) or not name:
            continue
        kind = next((k for pattern, k in _BY_NAME if re.search(pattern, name)), None)
        if kind is None:
            kind = next((k for pattern, k in _BY_DESCRIPTION if re.search(pattern, description, re.IGNORECASE)), None)
        if kind is not None:
            classes[name] = kind
    return classes
