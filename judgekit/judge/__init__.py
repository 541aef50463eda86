"""Judges: pinned models at temperature 0, called through litellm (see ``backend``)."""
