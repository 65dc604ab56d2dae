"""Rendering: every report kag prints or writes, one module per command family.

Library code hands finished values (summaries, comparisons, search results, evaluations) to
these modules, which turn them into text, markdown, JSON, HTML or rich tables. Only this
package, the commands and the console use rich.
"""
