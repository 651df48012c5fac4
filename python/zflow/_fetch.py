"""Fetch structures as TensorFlow's Session.run takes them: a name, or
nested lists, tuples, namedtuples and dicts of names; the results come back
in the same structure. "x:0" (with an output index) is a tensor to fetch;
"x" or "^x" is an operation to run as a target, whose result is None."""
import collections.abc


def _name_of(fetch):
    if isinstance(fetch, str):
        return fetch
    if isinstance(fetch, bytes):
        return fetch.decode("utf-8")
    name = getattr(fetch, "name", None)  # TensorFlow-like tensors and operations
    if isinstance(name, str):
        return name
    raise TypeError("Fetch argument %r has invalid type %s, must be a string or a nested "
                    "list, tuple, namedtuple or dict of strings" % (fetch, type(fetch).__name__))


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(x, "_fields")


class FetchPlan:
    """The unique tensor names and targets of a fetch structure, and how to
    rebuild the structure from the fetched values."""

    def __init__(self, fetches):
        self.tensors = []
        self.targets = []
        self._tensor_index = {}
        self._target_set = set()
        self._fetches = fetches
        self.tails = {}  # timeout -> encoded fetches and targets (zflow._wire)
        self._walk(fetches)

    def _walk(self, f):
        if isinstance(f, (list, tuple)):
            for x in f:
                self._walk(x)
        elif isinstance(f, collections.abc.Mapping):
            for x in f.values():
                self._walk(x)
        else:
            name = _name_of(f)
            if not name:
                raise ValueError("a fetch names nothing (an empty string)")
            if name.startswith("^") or ":" not in name:
                op = name[1:] if name.startswith("^") else name
                if op not in self._target_set:
                    self._target_set.add(op)
                    self.targets.append(op)
            elif name not in self._tensor_index:
                self._tensor_index[name] = len(self.tensors)
                self.tensors.append(name)

    def build(self, values):
        """The fetch structure with each tensor name replaced by its value
        (values in the order of self.tensors) and each target by None."""
        if isinstance(self._fetches, str):
            return values[0] if self.tensors else None
        return self._build(self._fetches, values)

    def _build(self, f, values):
        if _is_namedtuple(f):
            return type(f)(*[self._build(x, values) for x in f])
        if isinstance(f, (list, tuple)):
            return type(f)(self._build(x, values) for x in f)
        if isinstance(f, collections.abc.Mapping):
            items = [(k, self._build(v, values)) for k, v in f.items()]
            if isinstance(f, collections.defaultdict):
                d = type(f)(f.default_factory)
                d.update(items)
                return d
            try:
                return type(f)(items)
            except TypeError:
                return dict(items)
        name = _name_of(f)
        if name.startswith("^") or ":" not in name:
            return None
        return values[self._tensor_index[name]]


_plans = {}


def plan_for(fetches):
    """The FetchPlan of fetches; those of single names are kept."""
    if isinstance(fetches, str):
        plan = _plans.get(fetches)
        if plan is None:
            plan = FetchPlan(fetches)
            if len(_plans) < 1024:
                _plans[fetches] = plan
        return plan
    return FetchPlan(fetches)
