/* SPDX-License-Identifier: BSD-3-Clause */
/* NVML, loaded at run time: our own copies of the few declarations used, so
 * nothing of NVML is needed to build and a machine without a driver gets an
 * explanation instead of a loader error. Layouts follow nvml.h (stable ABI). */
#ifndef P2PK_NVML_DL_H
#define P2PK_NVML_DL_H

#include "p2pkit.h"

typedef int nvmlReturn_t; /* NVML_SUCCESS = 0 */
typedef struct nvmlDevice_st *nvmlDevice_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_NVLINK_MAX_LINKS 18

typedef struct {
  char busIdLegacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId;
  unsigned int pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;

typedef union {
  double dVal;
  int siVal;
  unsigned int uiVal;
  unsigned long ulVal;
  unsigned long long ullVal;
  signed long long sllVal;
  unsigned short usVal;
} nvmlValue_t;

typedef struct {
  unsigned int fieldId;
  unsigned int scopeId;
  long long timestamp;
  long long latencyUsec;
  int valueType;
  nvmlReturn_t nvmlReturn;
  nvmlValue_t value;
} nvmlFieldValue_t;

#define NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON 90
#define NVML_FI_DEV_NVLINK_LINK_COUNT 91
#define NVML_VALUE_TYPE_UNSIGNED_INT 1

enum { NVML_NVLINK_DEVICE_TYPE_GPU = 0, NVML_NVLINK_DEVICE_TYPE_IBMNPU = 1,
       NVML_NVLINK_DEVICE_TYPE_SWITCH = 2, NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xff };
enum { NVML_P2P_CAPS_INDEX_READ = 0, NVML_P2P_CAPS_INDEX_WRITE = 1,
       NVML_P2P_CAPS_INDEX_NVLINK = 2, NVML_P2P_CAPS_INDEX_ATOMICS = 3 };

typedef struct {
  nvmlReturn_t (*Init)(void);
  nvmlReturn_t (*Shutdown)(void);
  const char *(*ErrorString)(nvmlReturn_t);
  nvmlReturn_t (*SystemGetDriverVersion)(char *, unsigned int);
  nvmlReturn_t (*SystemGetNVMLVersion)(char *, unsigned int);
  nvmlReturn_t (*DeviceGetCount)(unsigned int *);
  nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int, nvmlDevice_t *);
  nvmlReturn_t (*DeviceGetHandleByPciBusId)(const char *, nvmlDevice_t *);
  nvmlReturn_t (*DeviceGetPciInfo)(nvmlDevice_t, nvmlPciInfo_t *);
  nvmlReturn_t (*DeviceGetName)(nvmlDevice_t, char *, unsigned int);
  nvmlReturn_t (*DeviceGetUUID)(nvmlDevice_t, char *, unsigned int);
  nvmlReturn_t (*DeviceGetNvLinkState)(nvmlDevice_t, unsigned int, int *);
  nvmlReturn_t (*DeviceGetNvLinkVersion)(nvmlDevice_t, unsigned int, unsigned int *);
  nvmlReturn_t (*DeviceGetNvLinkRemotePciInfo)(nvmlDevice_t, unsigned int, nvmlPciInfo_t *);
  nvmlReturn_t (*DeviceGetNvLinkRemoteDeviceType)(nvmlDevice_t, unsigned int, int *); /* optional */
  nvmlReturn_t (*DeviceGetP2PStatus)(nvmlDevice_t, nvmlDevice_t, int, int *);
  nvmlReturn_t (*DeviceGetCurrPcieLinkGeneration)(nvmlDevice_t, unsigned int *);
  nvmlReturn_t (*DeviceGetCurrPcieLinkWidth)(nvmlDevice_t, unsigned int *);
  nvmlReturn_t (*DeviceGetMaxPcieLinkGeneration)(nvmlDevice_t, unsigned int *);
  nvmlReturn_t (*DeviceGetMaxPcieLinkWidth)(nvmlDevice_t, unsigned int *);
  nvmlReturn_t (*DeviceGetFieldValues)(nvmlDevice_t, int, nvmlFieldValue_t *); /* optional */
} p2pk_nvml_api;

/* Load and initialise NVML once (thread-safe). P2PKIT_ERR_NVML with the
 * reason (library missing, init failed) otherwise; the failure is cached. */
p2pkit_status_t p2pk_nvml_get(const p2pk_nvml_api **api_p);
/* Map NVML's P2P status to nvidia-smi's code. */
p2pkit_p2p_code_t p2pk_nvml_p2p_code(int nvml_status);

#endif
