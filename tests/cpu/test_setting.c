/* p2pkit_setting_int: the registry's integer settings for code built on
 * p2pkit (the PyTorch backend reads P2PKIT_TORCH_ASYNC_ERROR_HANDLING and
 * whether P2PKIT_TIMEOUT is set through it): the value in force, whether
 * the environment set it, and the registry's own refusals. */
#include <stdlib.h>

#include "core/param.h"
#include "test.h"

static const char *const H = "P2PKIT_TORCH_ASYNC_ERROR_HANDLING";

TEST(default_and_set) {
  unsetenv(H);
  p2pk_param_reset();
  int64_t v = -9;
  int set = -1;
  CHECK_OK(p2pkit_setting_int(H, &v, &set));
  CHECK_EQ(v, 2);
  CHECK_EQ(set, 0);
  setenv(H, "0", 1);
  p2pk_param_reset();
  CHECK_OK(p2pkit_setting_int(H, &v, &set));
  CHECK_EQ(v, 0);
  CHECK_EQ(set, 1);
  CHECK_OK(p2pkit_setting_int("P2PKIT_TIMEOUT", &v, NULL)); /* is_set_p may be NULL */
  unsetenv(H);
  p2pk_param_reset();
}

TEST(refused) {
  int64_t v = 77;
  CHECK_EQ(p2pkit_setting_int("P2PKIT_NO_SUCH", &v, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "setting_int: P2PKIT_NO_SUCH is not an integer setting of "
                                 "p2pkit (`p2pkit env` lists them)");
  CHECK_EQ(p2pkit_setting_int("P2PKIT_NCCL", &v, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_setting_int(NULL, &v, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_EQ(p2pkit_setting_int(H, NULL, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  setenv(H, "4", 1);
  p2pk_param_reset();
  CHECK_EQ(p2pkit_setting_int(H, &v, NULL), P2PKIT_ERR_INVALID_ARGUMENT);
  CHECK_STR(p2pkit_last_error(), "P2PKIT_TORCH_ASYNC_ERROR_HANDLING='4' must be a whole number "
                                 "from 0 to 3");
  CHECK_EQ(v, 77); /* outputs set only on success */
  unsetenv(H);
  p2pk_param_reset();
}

T_MAIN(T_CASE(default_and_set), T_CASE(refused))
