/* FNV-1 (not 1a) 32-bit: multiply, then xor, per byte, as Go's hash/fnv.New32 and go-diskq's
 * partitioner; a key's partition is this modulo the partition count. */
#include "../core.h"

uint32_t adq_fnv1_32(const uint8_t *data, size_t length) {
    uint32_t value = 0x811C9DC5u;
    while (length--) value = (value * 0x01000193u) ^ *data++;
    return value;
}
