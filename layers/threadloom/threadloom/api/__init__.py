"""The deployable HTTP app's library side: deployment profile, runtime wiring, models and use-cases.

Everything here imports without I/O or environment variables; Powertools and Pydantic
(shipped by the Powertools layer in Lambda) are needed only by this package, never by
the core library.
"""

from __future__ import annotations
