#!/usr/bin/python3
"""Renders a chat template with Jinja2 the way Hugging Face's
apply_chat_template does (sandboxed, trim_blocks, lstrip_blocks), for
test_chat_template to compare fairkv's C rendering against.

Usage: render_template.py REQUEST.json
  REQUEST: {"template": str, "messages": [{"role", "content"}],
            "add_generation_prompt": bool, "bos_token": str, "eos_token": str}
Writes the rendered prompt to stdout, byte for byte; exit 77 when Jinja2
is not installed (Debian package python3-jinja2)."""
import json
import sys

try:
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    sys.stderr.write("render_template.py: no jinja2 (Debian package python3-jinja2)\n")
    sys.exit(77)


def raise_exception(message):
    raise ValueError(message)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        req = json.load(f)
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    out = env.from_string(req["template"]).render(
        messages=req["messages"],
        add_generation_prompt=req["add_generation_prompt"],
        bos_token=req["bos_token"],
        eos_token=req["eos_token"],
    )
    sys.stdout.buffer.write(out.encode("utf-8"))


if __name__ == "__main__":
    main()
