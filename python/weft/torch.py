"""A weft kernel as a differentiable torch operation.

    f = weft.torch.kernel_function(rt, "k", num_outputs=1)
    y = f(x, w, 0.5)          # tensors and numbers: the kernel's inputs
    y.sum().backward()        # x.grad, w.grad from the kernel's weft adjoint

The conventions are Warp's (and rt.jax_kernel's): the kernel's parameters
are its inputs followed by its num_outputs outputs. Shapes count
elements: a vec3 array of n elements is an (n, 3) tensor, a mat22 one
(n, 2, 2). Each output is a new zero tensor with as many elements as the
first tensor input (or output_shapes[i] elements), its element's trailing
dimensions, and the scalar type its parameter declares (or
output_dtypes[i]; an untyped parameter takes the first input's); the
launch runs over launch_dims (default: the first output's shape in
elements). Backward launches the kernel's adjoint on the saved inputs and
outputs, seeded with the outputs' gradients; inputs that are numbers get
no gradient (as in Warp).
"""
import torch as _torch

from . import _core

_LUA = """
__weft_python_torch = {
  -- weft.launch(k, dim, inputs, { adjoint = true, ... }) with flat arguments:
  -- name, the dims (nd of them), nin, nout, inputs, outputs, adj_inputs,
  -- adj_outputs (false where a parameter has no gradient).
  adjoint = function(name, nd, ...)
    local k = _G
    for part in name:gmatch("[^.]+") do k = k[part] end
    local a = { ... }
    local dim = {}
    for i = 1, nd do dim[i] = a[i] end
    local nin, nout = a[nd + 1], a[nd + 2]
    local ins, outs, ai, ao, p = {}, {}, {}, {}, nd + 2
    for i = 1, nin do ins[i] = a[p + i] end
    for i = 1, nout do outs[i] = a[p + nin + i] end
    for i = 1, nin do ai[i] = a[p + nin + nout + i] end
    for i = 1, nout do ao[i] = a[p + 2 * nin + nout + i] end
    weft.launch(k, nd == 1 and dim[1] or dim, ins,
                { adjoint = true, outputs = outs, adj_inputs = ai, adj_outputs = ao })
  end,
  -- the kernel's parameters, one line each (weft._interop.ffi_params)
  params = function(name)
    local k = _G
    for part in name:gmatch("[^.]+") do k = type(k) == "table" and k[part] or nil end
    if type(k) ~= "table" or not k._module then
      error(string.format("weft.torch.kernel_function('%s'): no kernel named '%s'", name, name), 0)
    end
    return weft._interop.ffi_params(k)
  end,
}
"""


def _dims(d):
    return (int(d),) if isinstance(d, int) else tuple(int(x) for x in d)


class _Param:
    """A kernel parameter as weft._interop.ffi_params describes it: its
    type name ("vec3f"), its scalar ("float32"), and the trailing tensor
    dimensions of its element (vec3: (3,); mat22: (2, 2)); None for a
    generic parameter, typed by the call."""
    __slots__ = ("name", "kind", "type", "scalar", "trail")

    def __init__(self, line):
        f = line.split()
        self.name, self.kind, self.type, self.scalar = f[0], f[1], f[2], f[3]
        ntrail, t0, t1 = int(f[5]), int(f[6]), int(f[7])
        self.trail = (t0, t1)[:ntrail]


def _params(rt, name):
    rt.exec('require "weft.xla"', "=weft.torch")
    return [_Param(x) for x in rt.call("__weft_python_torch.params", name).split("\n") if x]


def kernel_function(rt, name, num_outputs=1, launch_dims=None, output_shapes=None,
                    output_dtypes=None):
    """A function f(*inputs) -> output tensor (or a tuple when num_outputs
    > 1) running the Lua kernel at global path `name` of Runtime rt, with a
    backward pass through weft's adjoint of that kernel."""
    if not isinstance(name, str):
        raise TypeError("weft.torch.kernel_function: name must be a str, got %s"
                        % type(name).__name__)
    if num_outputs < 1:
        raise ValueError("weft.torch.kernel_function: num_outputs must be at least 1")
    if not getattr(rt, "_torch_lua", False):
        rt.exec(_LUA, "=weft/torch.py")
        rt._torch_lua = True
    where = "weft.torch.kernel_function(%r)" % name
    info = []  # the kernel's parameters, read on the first call

    def params(n):
        if not info:
            ps = _params(rt, name)
            if len(ps) != n + num_outputs:
                raise TypeError("%s: the kernel has %d parameters; %d inputs and %d outputs "
                                "make %d" % (where, len(ps), n, num_outputs, n + num_outputs))
            info.append(ps)
        return info[0]

    def trail(p):
        return p.trail if p.kind == "array" else ()

    def outputs_for(inputs, ps):
        k = next((i for i, x in enumerate(inputs) if isinstance(x, _torch.Tensor)), None)
        if k is None and (output_shapes is None or output_dtypes is None):
            raise TypeError("%s: no tensor input to shape the outputs by (give output_shapes "
                            "and output_dtypes)" % where)
        if k is not None:  # the first tensor's shape in elements (a vec3 array: n, not n x 3)
            first, nt = inputs[k], len(trail(ps[k]))
            elems = tuple(first.shape[:first.dim() - nt])
        outs = []
        for i in range(num_outputs):
            p = ps[len(inputs) + i]
            shape = _dims(output_shapes[i]) if output_shapes is not None else elems
            if output_dtypes is not None:
                dtype = output_dtypes[i]
            elif p.kind == "array" and isinstance(getattr(_torch, p.scalar, None), _torch.dtype):
                dtype = getattr(_torch, p.scalar)
            else:
                dtype = first.dtype
            dev = first.device if k is not None else "cpu"
            outs.append(_torch.zeros(shape + trail(p), dtype=dtype, device=dev))
        return outs

    def view(x, p):
        """x as the kernel's parameter p takes it: a tensor whose trailing
        dimensions are p's vector or matrix elements as an Array of them."""
        if p.kind == "array" and p.trail and isinstance(x, _torch.Tensor):
            return rt.import_dlpack(x, p.type, where)
        return x

    class _Op(_torch.autograd.Function):
        @staticmethod
        def forward(ctx, *inputs):
            ins = [x.detach().contiguous() if isinstance(x, _torch.Tensor) else x
                   for x in inputs]
            ps = params(len(ins))
            outs = outputs_for(ins, ps)
            p0 = ps[len(ins)]
            if launch_dims is not None:
                dim = _dims(launch_dims)
            else:
                dim = tuple(outs[0].shape[:outs[0].dim() - len(trail(p0))])
            rt.launch(name, dim, inputs=[view(x, p) for x, p in zip(ins, ps)],
                      outputs=[view(o, p) for o, p in zip(outs, ps[len(ins):])])
            ctx.ins, ctx.dim = ins, dim
            ctx.save_for_backward(*outs)
            return tuple(outs) if num_outputs > 1 else outs[0]

        @staticmethod
        def backward(ctx, *grad_outs):
            outs = list(ctx.saved_tensors)
            ins = ctx.ins
            ps = params(len(ins))
            pin, pout = ps[:len(ins)], ps[len(ins):]
            adj_in = [_torch.zeros_like(x) if isinstance(x, _torch.Tensor) and
                      x.dtype.is_floating_point else False for x in ins]
            # the adjoint may clear the seeds it consumed: give it copies
            adj_out = [g.detach().contiguous().clone() if g is not None else
                       _torch.zeros_like(o) for g, o in zip(grad_outs, outs)]
            args = [name, len(ctx.dim)] + list(ctx.dim) + [len(ins), len(outs)]
            args += [view(x, p) for x, p in zip(ins, pin)] + \
                [view(o, p) for o, p in zip(outs, pout)] + \
                [view(g, p) for g, p in zip(adj_in, pin)] + \
                [view(g, p) for g, p in zip(adj_out, pout)]
            try:
                rt.call("__weft_python_torch.adjoint", *args, nresults=0)
            except _core.WeftError as e:
                raise RuntimeError("%s backward: %s" % (where, e)) from None
            return tuple(g if g is not False else None for g in adj_in)

    def f(*inputs):
        return _Op.apply(*inputs)

    f.__name__ = name.replace(".", "_")
    f.__doc__ = "The weft kernel %r as a differentiable torch function." % name
    return f
