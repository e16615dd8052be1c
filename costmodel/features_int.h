/* Private to costmodel/: helpers the feature extractors share. */
#ifndef TT_COSTMODEL_FEATURES_INT_H
#define TT_COSTMODEL_FEATURES_INT_H

#include "../schedule/schedule.h"

/* Coefficient of `var` in the flat index `e` (0 when absent); false when `e` is not linear in
 * it. */
bool tt__flat_coefficient(const tt_expr_pool *p, tt_eid e, uint32_t var, int64_t *c);

#endif
