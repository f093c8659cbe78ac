/*
** dlpack.h -- the DLPack ABI (https://dmlc.github.io/dlpack), declared here
** because Debian's dlpack 0.6 lacks the versioned struct. Written from the
** specification's facts; the layouts are locked with static asserts.
**
**   DLTensor (48 bytes)            DLManagedTensorVersioned (80 bytes)
**   +0  data                       +0  version {major, minor}
**   +8  device {type, id}          +8  manager_ctx
**   +16 ndim                       +16 deleter(self)
**   +20 dtype {code, bits, lanes}  +24 flags (READ_ONLY 1, IS_COPIED 2)
**   +24 shape (int64 *)            +32 dl_tensor
**   +32 strides (int64 *, in elements; NULL = compact row-major)
**   +40 byte_offset
**
**   DLManagedTensor (legacy, 64 bytes): dl_tensor, manager_ctx, deleter.
*/
#ifndef WF_DLPACK_H
#define WF_DLPACK_H

#include <stddef.h>
#include <stdint.h>

#define WF_DLPACK_MAJOR 1
#define WF_DLPACK_MINOR 1

/* device types */
enum {
  WF_kDLCPU = 1,
  WF_kDLCUDA = 2,
  WF_kDLCUDAHost = 3,
  WF_kDLOpenCL = 4,
  WF_kDLVulkan = 7,
  WF_kDLMetal = 8,
  WF_kDLVPI = 9,
  WF_kDLROCM = 10,
  WF_kDLROCMHost = 11,
  WF_kDLExtDev = 12,
  WF_kDLCUDAManaged = 13,
  WF_kDLOneAPI = 14,
  WF_kDLWebGPU = 15,
  WF_kDLHexagon = 16,
};

/* dtype codes */
enum {
  WF_kDLInt = 0,
  WF_kDLUInt = 1,
  WF_kDLFloat = 2,
  WF_kDLOpaqueHandle = 3,
  WF_kDLBfloat = 4,
  WF_kDLComplex = 5,
  WF_kDLBool = 6,
};

/* DLManagedTensorVersioned.flags */
#define WF_DLPACK_FLAG_READ_ONLY (1ULL << 0)
#define WF_DLPACK_FLAG_IS_COPIED (1ULL << 1)

typedef struct {
  int32_t device_type;
  int32_t device_id;
} DLDevice;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

_Static_assert(sizeof(DLTensor) == 48, "DLTensor layout");
_Static_assert(sizeof(DLManagedTensor) == 64, "DLManagedTensor layout");
_Static_assert(sizeof(DLManagedTensorVersioned) == 80, "DLManagedTensorVersioned layout");
_Static_assert(offsetof(DLManagedTensorVersioned, dl_tensor) == 32, "dl_tensor offset");
_Static_assert(offsetof(DLManagedTensor, deleter) == 56, "legacy deleter offset");

#endif
