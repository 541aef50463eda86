"""How ``emails-inspect-0.3.285.eval`` was made: a real Inspect run, not a hand-written log.

Needs inspect_ai (0.3.285 made the checked-in file; it is not a judgekit dependency, so the
tests never run this). The model is Inspect's ``mockllm`` playing scripted outputs, so no
provider is called; token usage is set on each output because mockllm would otherwise count
tokens with tiktoken, which downloads its encodings.

    pip install inspect-ai==0.3.285
    python tests/data/inspect/make_real_log.py LOG_DIR      # writes LOG_DIR/<time>_emails_<id>.eval

Two samples: ``s1`` looks a user up, updates the email (the tool writes the store inside a tool
span, itself inside the generate solver's span and the root ``solvers`` span, so the log holds
the same store change three times) and answers; ``2`` calls update_email with a bad address,
which raises ToolError (a failed call), and answers. The .eval's members are zstd-compressed,
Inspect's default since it moved off DEFLATE.
"""

import sys

from inspect_ai import Task, eval, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import includes
from inspect_ai.solver import generate, system_message, use_tools
from inspect_ai.tool import ToolError, tool
from inspect_ai.util import store


@tool
def update_email():
    async def execute(user_id: int, email: str):
        """Update a user's email.

        Args:
          user_id: the user
          email: new email
        """
        if "@" not in email:
            raise ToolError("not an email address")
        store().set("email", email)
        users = store().get("users", [])
        users.append(user_id)
        store().set("users", users)
        return {"ok": True, "user_id": user_id}

    return execute


@tool
def lookup():
    async def execute(user_id: int):
        """Look up a user.

        Args:
          user_id: the user
        """
        return f"user {user_id}: alice@old.com " + "x" * 150

    return execute


@task
def emails():
    return Task(
        dataset=[
            Sample(input="Set user 1's email to a@x.com", target="a@x.com", id="s1", metadata={"difficulty": "easy"}),
            Sample(input="Set user 2's email to broken", target="broken", id=2),
        ],
        solver=[system_message("You are a support agent."), use_tools([lookup(), update_email()]), generate()],
        scorer=includes(),
    )


def main(log_dir: str) -> None:
    outputs = [
        ModelOutput.for_tool_call("mockllm/model", "lookup", {"user_id": 1}, tool_call_id="c1"),
        ModelOutput.for_tool_call("mockllm/model", "update_email", {"user_id": 1, "email": "a@x.com"}, tool_call_id="c2"),
        ModelOutput.from_content("mockllm/model", "Done: a@x.com"),
        ModelOutput.for_tool_call("mockllm/model", "update_email", {"user_id": 2, "email": "broken"}, tool_call_id="c3"),
        ModelOutput.from_content("mockllm/model", "It failed."),
    ]
    for output in outputs:
        output.usage = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)
    model = get_model("mockllm/model", custom_outputs=outputs)
    eval(emails(), model=model, log_dir=log_dir, log_format="eval", max_samples=1, display="none")


if __name__ == "__main__":
    main(sys.argv[1])
