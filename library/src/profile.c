/* msf_profile_print() of a firmware that does not profile its edges: nothing to print. With
 * custom_msf_profile = yes the build defines MSF_PROFILE_EDGES and generates the real one,
 * which times every edge (msf/runtime.h). */
#include "msf/runtime.h"

#ifndef MSF_PROFILE_EDGES
void msf_profile_print(void)
{
}
#endif
