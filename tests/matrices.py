"""Small matrix files shared by the unit tests."""

# One unsloth release against the vulnerable zoo release: the cell u1__z1.
ONE_CELL = """
schema = 1
[[build]]
name = "u1"
package = "unsloth"
source = "pypi"
version = "2026.10.9"
[[build]]
name = "z1"
package = "unsloth_zoo"
source = "pypi"
version = "2026.9.3"
"""
# One unsloth build against a vulnerable and a fixed zoo release: cells u1__z1 and u1__z2.
GOOD = ONE_CELL + """[[build]]
name = "z2"
package = "unsloth_zoo"
source = "pypi"
version = "2026.10.9"
"""
