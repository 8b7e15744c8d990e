"""The codec's foundations: the scaffold data types (:mod:`.types`), name registries
(:mod:`.registry`), where package data lives (:mod:`.layout`), the model zoo and its fetching
from package registries (:mod:`.models`, :mod:`.packages`), frame helpers (:mod:`.frames`)
and the command-line helpers the three programs share (:mod:`.console`).

Every other part of the codec imports these; they import nothing of it but the person
detector's definition (``codec/detection``, which the model zoo converts), so the types and
registries can be shared without cycles (``tests/test_import_graph.py`` checks the layers).
"""
